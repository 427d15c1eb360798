package httpd

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"kvmd/streamer"
)

// Streamer is the video streamer (package streamer implements it).
type Streamer interface {
	// State is the full state, asked of the running streamer now.
	State(ctx context.Context) map[string]any
	// Current is the last state seen, for a new WebSocket client.
	Current() map[string]any
	SetParams(streamer.Change) error
	Reset()
	Snapshot(ctx context.Context, save, load, allowOffline bool) (*streamer.Snapshot, error)
	Preview(snap *streamer.Snapshot, maxWidth, maxHeight, quality int) ([]byte, error)
	DeleteSnapshot()
	RawSnapshot(ctx context.Context) (*streamer.Snapshot, error)
	Stream(ctx context.Context, rawQuery string) (*http.Response, func(), error)
	// AddViewer counts a WebSocket client that wants the stream, which
	// keeps the streamer running until the returned func is called.
	AddViewer() (remove func())
	Viewers() int
}

// defaultStreamWriteTimeout cuts a stream client that accepts nothing for
// this long; until then the streamer waits for it alone (each client has
// its own connection to the streamer, which sends a connection its next
// frame only when it has taken the last).
const defaultStreamWriteTimeout = 20 * time.Second

// ocrUnavailable answers kvmd's /streamer/ocr: this daemon has no OCR.
func ocrUnavailable(*Server, http.ResponseWriter, *http.Request) error {
	return errNoOCR
}

// errNoOCR answers what asks for OCR (/streamer/ocr, a snapshot with
// ocr=1): a part this daemon does not have, an expected refusal (NotNow)
// logged at info at a bounded rate, never an error line each.
var errNoOCR = NotNow("OCR is not available in this daemon", nil)

// streamerError maps the streamer's errors to kvmd's answers: kvmd
// answers a snapshot it cannot take with a bare UnavailableError (503);
// here the message says why. No streamer installed, no capture, no
// signal, no saved snapshot are states of the device, not faults
// (NotNow); a streamer that does not answer is one.
func streamerError(err error) error {
	var pe *streamer.ParamError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe):
		return BadParam(pe.Param, pe.Why)
	case errors.Is(err, streamer.ErrQualityNotSupported):
		return &Error{Status: http.StatusBadRequest, Name: "StreamerQualityNotSupported", Msg: "This streamer does not support quality settings"}
	case errors.Is(err, streamer.ErrResolutionNotSupported):
		return &Error{Status: http.StatusBadRequest, Name: "StreamerResolutionNotSupported", Msg: "This streamer does not support resolution settings"}
	case errors.Is(err, streamer.ErrH264NotSupported):
		return &Error{Status: http.StatusBadRequest, Name: "StreamerH264NotSupported", Msg: "This streamer does not support H264"}
	case errors.Is(err, streamer.ErrNotInstalled):
		return NotNow("No streamer: ustreamer is not installed (install the ustreamer package)", err)
	case errors.Is(err, streamer.ErrNoCapture):
		return NotNow("No streamer: no video capture device was found", err)
	case errors.Is(err, streamer.ErrOffline):
		return NotNow("No signal: the picture is offline (allow_offline=1 takes it anyway)", nil)
	case errors.Is(err, streamer.ErrNoSnapshot):
		return NotNow("No saved snapshot (take one with save=1)", nil)
	case errors.Is(err, context.Canceled):
		return err
	}
	return Unavailable("The streamer did not answer", err)
}

// streamer returns the Devices' streamer, or errNoStreamer.
func (s *Server) streamer() (Streamer, error) {
	if st := s.cfg.Devices.Streamer; st != nil {
		return st, nil
	}
	return nil, errNoStreamer
}

// streamerSetParams is kvmd's set_params: each parameter given (an empty
// value is not given) must be one this capture has and valid.
func (s *Server) streamerSetParams(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	ch := streamer.Change{}
	for _, k := range []string{"quality", "desired_fps", "resolution", "h264_bitrate", "h264_gop"} {
		if v := q.Get(k); v != "" {
			ch[k] = v
		}
	}
	st, err := s.streamer()
	if err != nil {
		return err
	}
	if err := st.SetParams(ch); err != nil {
		return streamerError(err)
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) streamerReset(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streamer()
	if err != nil {
		return err
	}
	st.Reset()
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// queryIntDefault reads an integer query parameter from lo to hi
// (outside them is an error, as kvmd's validators have it); absent or
// empty gives def.
func queryIntDefault(r *http.Request, name string, def, lo, hi int) (int, error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, BadParam(name, "not an integer from "+strconv.Itoa(lo)+" to "+strconv.Itoa(hi))
	}
	return n, nil
}

// streamerSnapshot is kvmd's GET /streamer/snapshot: a JPEG with the
// streamer's headers, taken now (the streamer started for it if need
// be), or the saved one (load=1); a preview (preview=1) is scaled to
// preview_max_width x preview_max_height (both 0: a fifth) at
// preview_quality. Every parameter is checked before anything is taken.
func (s *Server) streamerSnapshot(w http.ResponseWriter, r *http.Request) error {
	var flags [5]bool
	for i, name := range []string{"save", "load", "allow_offline", "preview", "ocr"} {
		v, err := queryBool(r, name, false)
		if err != nil {
			return err
		}
		flags[i] = v
	}
	save, load, allowOffline, preview, ocr := flags[0], flags[1], flags[2], flags[3], flags[4]
	maxW, err := queryIntDefault(r, "preview_max_width", 0, 0, 1<<16)
	if err != nil {
		return err
	}
	maxH, err := queryIntDefault(r, "preview_max_height", 0, 0, 1<<16)
	if err != nil {
		return err
	}
	quality, err := queryIntDefault(r, "preview_quality", 80, 1, 100)
	if err != nil {
		return err
	}
	if ocr {
		return errNoOCR
	}
	st, err := s.streamer()
	if err != nil {
		return err
	}
	release, err := s.holdStream(w, r, &s.snapshotKind)
	if err != nil {
		return err
	}
	defer release()
	snap, err := st.Snapshot(r.Context(), save, load, allowOffline)
	if err != nil {
		return streamerError(err)
	}
	data := snap.Data
	if preview {
		if data, err = st.Preview(snap, maxW, maxH, quality); err != nil {
			return Unavailable("The snapshot could not be scaled", err)
		}
	}
	writeSnapshot(w, snap, data)
	return nil
}

// writeSnapshot answers with a JPEG and the streamer's headers, named as
// ustreamer spells them (X-UStreamer-Online: net/http makes them
// X-Ustreamer-Online).
func writeSnapshot(w http.ResponseWriter, snap *streamer.Snapshot, data []byte) {
	h := w.Header()
	for k, v := range snap.Header {
		if rest, ok := strings.CutPrefix(k, "X-Ustreamer-"); ok {
			k = "X-UStreamer-" + rest
		}
		h[k] = v
	}
	h.Set("Content-Type", "image/jpeg")
	h.Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

func (s *Server) streamerDeleteSnapshot(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streamer()
	if err != nil {
		return err
	}
	st.DeleteSnapshot()
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// streamerRawSnapshot is /streamer/snapshot outside /api: ustreamer's own
// answer, its placeholder included when there is no signal.
func (s *Server) streamerRawSnapshot(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streamer()
	if err != nil {
		return err
	}
	release, err := s.holdStream(w, r, &s.snapshotKind)
	if err != nil {
		return err
	}
	defer release()
	snap, err := st.RawSnapshot(r.Context())
	if err != nil {
		return streamerError(err)
	}
	writeSnapshot(w, snap, snap.Data)
	return nil
}

// streamHeaders are the headers of ustreamer's stream answer passed on:
// its type (with the boundary), its cache headers, and the stream_client
// cookie PiKVM's page finds its client by (web/share/js/kvm/stream_mjpeg.js).
var streamHeaders = []string{"Content-Type", "Cache-Control", "Pragma", "Expires", "Set-Cookie", "Access-Control-Allow-Origin"}

// streamerStream is /streamer/stream: ustreamer's MJPEG stream, relayed as
// it comes, each read flushed at once (no frame is held here). A client
// that stops reading holds only its own connection to the streamer: the
// streamer sends that connection no new frame until it took the last,
// and the others go on. It ends when the client goes, the streamer ends,
// the client's session ends, or the server shuts down.
func (s *Server) streamerStream(w http.ResponseWriter, r *http.Request) error {
	st, err := s.streamer()
	if err != nil {
		return err
	}
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "multipart/x-mixed-replace;boundary=boundarydonotcross")
		w.WriteHeader(http.StatusOK)
		return nil
	}
	release, err := s.holdStream(w, r, &s.videoKind)
	if err != nil {
		return err
	}
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	resp, done, err := st.Stream(ctx, r.URL.RawQuery)
	if err != nil {
		return streamerError(err)
	}
	defer done()
	defer resp.Body.Close()
	h := w.Header()
	for _, k := range streamHeaders {
		if v := resp.Header.Values(k); len(v) > 0 {
			h[k] = v
		}
	}
	h.Set("X-Accel-Buffering", "no") // a reverse proxy must not hold frames back
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	if rc.Flush() != nil {
		return nil
	}
	timeout := cmp.Or(s.cfg.Devices.StreamWriteTimeout, defaultStreamWriteTimeout)
	buf := make([]byte, 64<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			rc.SetWriteDeadline(time.Now().Add(timeout))
			if _, err := w.Write(buf[:n]); err != nil {
				return nil // the client left or stopped reading
			}
			if rc.Flush() != nil {
				return nil
			}
		}
		if rerr != nil {
			return nil // the streamer ended the stream
		}
	}
}
