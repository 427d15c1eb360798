package httpd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"

	"kvmd/auth"
	"kvmd/h264"
	"kvmd/mediaws"
	"kvmd/whep"
)

// H264 is the H.264 encoding of the picture (package h264's Pipeline).
type H264 interface {
	Subscribe() *h264.Sub
	// Unavailable says why no encoder can run here, nil when one can.
	Unavailable() error
}

// h264Unavailable is the 503 of a client of the H.264 when no encoder
// can run here (an error wrapping h264.ErrUnavailable), nil otherwise.
func (s *Server) h264Unavailable() error {
	if err := s.cfg.Devices.H264.Unavailable(); err != nil {
		return NotNow("No H.264: "+h264.Why(err), err)
	}
	return nil
}

// WebRTC is the WHEP sessions (package whep's Manager).
type WebRTC interface {
	Offer(ctx, life context.Context, offer, owner string, ended func()) (whep.Session, error)
	Delete(id, owner string, admin bool) error
	ICEServers() []whep.ICEServer
	MaxPeers() int
}

// whepMaxBody bounds a WHEP offer: a browser's is 3 to 8 KiB.
const whepMaxBody = 64 << 10

// mediaWriteTimeout cuts a Direct H.264 client that takes nothing for
// this long, as /streamer/stream's.
const mediaWriteTimeout = defaultStreamWriteTimeout

// mediaInfo is kvmd-media's GET / (GET /api/media behind PiKVM's nginx):
// the formats there are.
func (s *Server) mediaInfo(w http.ResponseWriter, r *http.Request) error {
	return WriteJSON(w, map[string]any{"media": mediaws.Info()})
}

// mediaWS is GET /api/media/ws: PiKVM's Direct H.264 (package mediaws).
// ?video=h264 is the scripts' "pure" mode; any other video format is
// kvmd's ValidatorError. It counts as one of the user's WebSockets, and
// ends when the client leaves, its session ends or the server stops.
func (s *Server) mediaWS(w http.ResponseWriter, r *http.Request) error {
	v := strings.TrimSpace(r.URL.Query().Get("video"))
	if v != "" && v != "h264" {
		return BadParam("video", "not a video format of this daemon (h264)")
	}
	if err := s.checkHandshake(r); err != nil {
		return err
	}
	if err := s.h264Unavailable(); err != nil {
		return err
	}
	release, err := s.streams.take(&s.wsKind, IdentityFrom(r.Context()))
	if err != nil {
		w.Header().Set("Connection", "close")
		return err
	}
	defer release()
	c, err := websocket.Accept(w, asHTTP11(r), &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return nil // Accept wrote its answer
	}
	defer c.CloseNow()
	c.SetReadLimit(wsReadLimit)
	err = mediaws.Serve(r.Context(), mediaws.WebSocket(c, mediaWriteTimeout), s.cfg.Devices.H264, v == "h264", s.cfg.Log)
	switch {
	case errors.Is(err, mediaws.ErrWrite):
		c.Close(websocket.StatusPolicyViolation, "client too slow")
	case r.Context().Err() != nil:
		select {
		case <-s.done:
			c.Close(websocket.StatusGoingAway, "server shutting down")
		default:
			c.Close(websocket.StatusPolicyViolation, "session ended")
		}
	default:
		c.Close(websocket.StatusNormalClosure, "")
	}
	return nil
}

// whepLocation is a session's resource, where a DELETE ends it.
func whepLocation(id string) string { return "/api/media/whep?id=" + url.QueryEscape(id) }

// whepOffer is WHEP's POST: an SDP offer (application/sdp) in, 201 with
// the answer and the session's Location out, with a Link header for each
// STUN or TURN server configured. A session counts against its user's
// share of WebRTC peers, and ends when the credential that made it ends
// (a session logged out, a token revoked) and when the server stops.
func (s *Server) whepOffer(w http.ResponseWriter, r *http.Request) error {
	rtc := s.cfg.Devices.WebRTC
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "application/sdp" {
		return &Error{Status: http.StatusUnsupportedMediaType, Name: "BadRequestError", Msg: "A WHEP offer is an SDP offer: Content-Type: application/sdp"}
	}
	body, err := io.ReadAll(r.Body) // read by serve, under routeMaxBody
	if err != nil {
		return BadRequest("Request body could not be read", err)
	}
	if err := s.h264Unavailable(); err != nil {
		return err
	}
	id := IdentityFrom(r.Context())
	release, err := s.streams.take(&s.rtcKind, id)
	if err != nil {
		return err
	}
	// The session's life: the server's, and the credential's.
	life, cancel := context.WithCancel(s.base)
	stop := func() bool { return false }
	if id.done != nil {
		stop = context.AfterFunc(id.done, cancel)
	}
	ended := func() {
		stop()
		cancel()
		release()
	}
	ctx, done := context.WithTimeout(r.Context(), 10*time.Second)
	defer done()
	sess, err := rtc.Offer(ctx, life, string(body), id.User, ended)
	if err != nil {
		return whepError(err)
	}
	h := w.Header()
	h.Set("Content-Type", "application/sdp")
	h.Set("Location", whepLocation(sess.ID))
	for _, srv := range rtc.ICEServers() {
		for _, u := range srv.URLs {
			link := fmt.Sprintf("<%s>; rel=\"ice-server\"", u)
			if srv.Username != "" {
				link += fmt.Sprintf("; username=%q; credential=%q; credential-type=\"password\"", srv.Username, srv.Credential)
			}
			h.Add("Link", link)
		}
	}
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, sess.Answer)
	return nil
}

// whepDelete is WHEP's DELETE of a session's resource (?id=): its owner's,
// or any by an admin.
func (s *Server) whepDelete(w http.ResponseWriter, r *http.Request) error {
	sid := r.URL.Query().Get("id")
	if sid == "" {
		return BadParam("id", "missing: the session's id, from the Location of its offer's answer")
	}
	id := IdentityFrom(r.Context())
	if err := s.cfg.Devices.WebRTC.Delete(sid, id.User, id.Role >= auth.RoleAdmin); err != nil {
		return whepError(err)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// whepError maps the manager's errors to answers.
func whepError(err error) error {
	switch {
	case errors.Is(err, whep.ErrNoH264):
		return &Error{Status: http.StatusBadRequest, Name: "ValidatorError", Msg: "The offer has no H.264 this daemon sends: packetization-mode=1 of profile-level-id 42e0xx or 4200xx (Constrained Baseline)", Err: err}
	case errors.Is(err, whep.ErrBadOffer):
		return &Error{Status: http.StatusBadRequest, Name: "ValidatorError", Msg: "Bad offer: an SDP offer that receives video is needed", Err: err}
	case errors.Is(err, whep.ErrNoCandidates):
		return Unavailable("No WebRTC: the daemon has no network address to offer (it may not read its interfaces); use /api/media/ws", err)
	case errors.Is(err, whep.ErrTooManyPeers):
		return NotNow("Too many WebRTC peers; try again later, or use /api/media/ws or /streamer/stream", err)
	case errors.Is(err, whep.ErrNoSession):
		return &Error{Status: http.StatusNotFound, Name: "NotFoundError", Msg: "No such WebRTC session (ended, or not yours)"}
	case errors.Is(err, whep.ErrClosed), errors.Is(err, context.Canceled):
		return NotNow("The daemon is stopping", err)
	case errors.Is(err, context.DeadlineExceeded):
		return Unavailable("The WebRTC session could not be set up in time", err)
	}
	return Unavailable("The WebRTC session could not be set up", err)
}
