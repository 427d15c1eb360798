package httpd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"kvmd/auth"
)

// DefaultMaxWSPerUser is the default of Config.MaxWSPerUser: a browser tab
// of PiKVM's page or this daemon's holds one WebSocket, a Home Assistant
// integration one; sixteen leaves a user a tab on every screen and a
// few scripts, and keeps one token from holding the device's connections.
const DefaultMaxWSPerUser = 16

// DefaultLogFollowers is the default of Config.LogFollowers, as
// package journal's.
const DefaultLogFollowers = 20

// DefaultVNCPerUser bounds the VNC connections one user holds at once
// (package vnc; the VNC server bounds them all, kvmd-vnc's ten): a viewer
// on a few screens.
const DefaultVNCPerUser = 4

// DefaultVideoPerUser bounds one user's video streams (/streamer/stream,
// and the media WebSocket and WHEP sessions to come): a page shows one
// stream; eight leaves a user several tabs and a recorder, and each holds
// a connection to the streamer and a buffer of a frame.
const DefaultVideoPerUser = 8

// DefaultSnapshotsPerUser bounds one user's snapshots in flight at once:
// one may wait seconds for the streamer to start, and holds a picture.
const DefaultSnapshotsPerUser = 4

// A stream is a request that holds its connection for long: a WebSocket,
// a log follow, a video stream, a snapshot (which may wait for the
// streamer to start). Without shares, one viewer's token opening a
// thousand WebSockets, or video streams, held every connection the server
// may have open (Config.MaxConns), and each new connection was then
// closed at once, an admin's login too; twenty follows held every
// --log-followers slot. So streams are shared out (holdStream is the one
// call that takes a share):
//
//   - by user: one user (whatever the credential: password, session, API
//     token; every session and token of the user together) holds at most
//     perUser streams of a kind: Config.MaxWSPerUser WebSockets, a
//     quarter of Config.LogFollowers follows, DefaultVideoPerUser video
//     streams, DefaultSnapshotsPerUser snapshots, DefaultVNCPerUser VNC
//     connections (HoldVNC). Beyond: 429.
//   - ordinary users (below admin) together hold at most three quarters
//     of Config.MaxConns in streams of every kind, and four fifths of the
//     log follows: the rest is kept for admins, logins and short
//     requests. Beyond: 503. Admins are bound only by the kind's own
//     bound (LogFollowers) and the connection table.
//
// A refusal is logged at warn once a minute at most for each user and
// kind, with the number refused since; the request's own refusal line is
// not written besides (Error.logged).
type streamKind struct {
	name    string // for messages: "WebSockets", "log follows"
	perUser int
	max     int // of this kind in all, 0: no bound of its own
	reserve int // of max, kept for admins
}

// shareLogEvery is the least time between two log lines about one user's
// refusals of one kind.
const shareLogEvery = time.Minute

// maxShareLogKeys bounds the users remembered for the log's rate limit.
const maxShareLogKeys = 256

type streams struct {
	budget int // streams of ordinary users, of every kind together
	log    *slog.Logger
	now    func() time.Time

	mu       sync.Mutex
	ordinary int                    // streams of ordinary users open
	byKind   map[*streamKind]int    // streams open, by kind
	byUser   map[shareKey]int       // streams open, by kind and user
	logged   map[shareKey]*shareLog // refusals logged, by kind and user
}

type shareKey struct {
	kind *streamKind
	user string
}

type shareLog struct {
	last time.Time
	held int
}

func newStreams(maxConns int, log *slog.Logger) *streams {
	return &streams{
		budget: maxConns - max(maxConns/4, 1),
		log:    log, now: time.Now,
		byKind: map[*streamKind]int{}, byUser: map[shareKey]int{}, logged: map[shareKey]*shareLog{},
	}
}

// take gives id a stream of kind k, or refuses it. release gives it back;
// it must be called once.
func (s *streams) take(k *streamKind, id Identity) (release func(), err error) {
	admin := id.Role >= auth.RoleAdmin
	key := shareKey{k, id.User}
	s.mu.Lock()
	var e *Error
	switch {
	case s.byUser[key] >= k.perUser:
		e = &Error{Status: http.StatusTooManyRequests, Name: "TooManyRequestsError",
			Msg: fmt.Sprintf("This user has %d %s open, the most one user may hold; close one first", s.byUser[key], k.name)}
	case k.max > 0 && s.byKind[k] >= k.max:
		e = &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError", Expected: true,
			Msg: fmt.Sprintf("All %d %s are taken; try again later", k.max, k.name)}
	case !admin && k.max > 0 && s.byKind[k] >= k.max-k.reserve:
		e = &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError", Expected: true,
			Msg: fmt.Sprintf("All the %s open to users below admin are taken; try again later", k.name)}
	case !admin && s.ordinary >= s.budget:
		e = &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError", Expected: true,
			Msg: "Too many connections are held open by long requests (WebSockets, log follows, video streams, snapshots, VNC connections); try again later"}
	}
	if e != nil {
		held, logNow := s.noteLocked(key)
		open, total := s.byUser[key], s.byKind[k]
		s.mu.Unlock()
		if logNow {
			args := []any{"user", auth.LogName(id.User), "role", id.Role.String(), "open", open, "share", k.perUser,
				"all", total, "why", e.Msg}
			if held > 0 {
				args = append(args, "held_back", held, "interval", shareLogEvery.String())
			}
			s.log.Warn("refused beyond the user's share of "+k.name, args...)
		}
		e.logged = true
		return nil, e
	}
	s.byUser[key]++
	s.byKind[k]++
	if !admin {
		s.ordinary++
	}
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.byUser[key]--; s.byUser[key] <= 0 {
				delete(s.byUser, key)
			}
			s.byKind[k]--
			if !admin {
				s.ordinary--
			}
		})
	}, nil
}

// HoldVNC takes the share of a VNC connection (package vnc) of user,
// whose role is role, for as long as the connection lasts: VNC
// connections are streams of their own kind, DefaultVNCPerUser a user,
// counted with the others in what users below admin may hold together.
// A refusal's text is the reason the VNC client is shown. release gives
// the share back; call it once.
func (s *Server) HoldVNC(user string, role auth.Role) (release func(), err error) {
	release, err = s.streams.take(&s.vncKind, Identity{User: user, Role: role, Method: auth.MethodVNC})
	var e *Error
	if errors.As(err, &e) {
		return nil, errors.New(e.Msg)
	}
	return release, err
}

// noteLocked counts a refusal for key and tells whether to log it now,
// and how many were held back since the last line.
func (s *streams) noteLocked(key shareKey) (held int, now bool) {
	t := s.now()
	l := s.logged[key]
	if l == nil {
		if len(s.logged) >= maxShareLogKeys {
			for k, v := range s.logged {
				if t.Sub(v.last) >= shareLogEvery {
					delete(s.logged, k)
				}
			}
		}
		if len(s.logged) >= maxShareLogKeys {
			key.user = "(others)"
			l = s.logged[key]
		}
		if l == nil {
			l = &shareLog{}
			s.logged[key] = l
		}
	}
	if !l.last.IsZero() && t.Sub(l.last) < shareLogEvery {
		l.held++
		return 0, false
	}
	held, l.last, l.held = l.held, t, 0
	return held, true
}

// holdStream is the one call a request that holds its connection for long
// makes before it begins: a WebSocket, a log follow, a video stream, a
// snapshot, and any such endpoint to come (the media WebSocket, WHEP),
// with the kind it counts under. It takes the identity's share of k; a
// refusal (429 beyond the user's share, 503 beyond what users below admin
// may hold together) is an error in the envelope, and the connection is
// closed after it, so that its place goes back at once. For the password
// of an external backend's user it also asks, every so often, whether the
// password still holds (auth.Principal.Recheck), and ends the request when
// it does not: a change at the backend is seen only by asking. (Every
// other identity's requests end by themselves when it is revoked:
// request.Done.) release gives everything back; call it when the request
// ends (defer).
func (s *Server) holdStream(w http.ResponseWriter, r *http.Request, k *streamKind) (release func(), err error) {
	id := IdentityFrom(r.Context())
	give, err := s.streams.take(k, id)
	if err != nil {
		w.Header().Set("Connection", "close")
		return nil, err
	}
	q := requestFrom(r.Context())
	if id.recheck == nil || q == nil || id.recheckEvery <= 0 {
		return give, nil
	}
	stop := s.recheckPassword(q, id)
	return func() { stop(); give() }, nil
}

// recheckPassword asks every id.recheckEvery whether id's password still
// lets it in with the same role, until the request ends or stop is
// called; when it does not, the request ends (request.revoke).
func (s *Server) recheckPassword(q *request, id Identity) (stop func()) {
	ctx, cancel := context.WithCancel(q)
	go func() {
		t := time.NewTicker(id.recheckEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			role, err := id.recheck(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil || role != id.Role {
				why := "the password is no longer accepted"
				if err == nil {
					why = "the role changed from " + id.Role.String() + " to " + role.String()
				}
				args := []any{"user", auth.LogName(id.User), "method", string(id.Method), "why", why}
				if err != nil {
					args = append(args, "err", err)
				}
				s.cfg.Log.Info("request ended: its credentials changed", args...)
				q.revoke()
				return
			}
		}
	}()
	return cancel
}
