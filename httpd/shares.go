package httpd

import (
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

// A stream is a request that holds its connection for long: a WebSocket,
// a log follow. Without shares, one viewer's token opening a thousand
// WebSockets held every connection the server may have open
// (Config.MaxConns), and each new connection was then closed at once,
// an admin's login too; twenty follows held every --log-followers slot.
// So streams are shared out:
//
//   - by user: one user (whatever the credential: password, session, API
//     token; every session and token of the user together) holds at most
//     perUser streams of a kind: Config.MaxWSPerUser WebSockets, a
//     quarter of Config.LogFollowers follows. Beyond: 429.
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
			Msg: "Too many connections are held open by WebSockets, log follows and VNC connections; try again later"}
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
