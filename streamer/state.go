package streamer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"kvmd/hw"
	"kvmd/subsystem"
)

// The keys of the state, kvmd's (kvmd/apps/kvmd/streamer/__init__.py),
// and this daemon's own "capture", "error" and "h264".
var stateKeys = []string{"features", "limits", "params", "applied", "streamer", "snapshot", "capture", "error", "h264"}

// CaptureState is the daemon's own reading of the capture device, which
// kvmd's state does not have: the signal's truth where ustreamer's
// "online" is not (4.9 keeps it true without a signal), and known when no
// streamer runs.
type CaptureState struct {
	Device     string         `json:"device"`
	Status     string         `json:"status"`
	Signal     *bool          `json:"signal"`
	Resolution *hw.Resolution `json:"resolution"`
	FPS        *float64       `json:"fps"`
}

// State returns the full state, kvmd's GET /api/streamer result: the
// running streamer is asked for its own (/state), with its
// source.online false when the daemon's reading of the capture sees no
// signal.
func (s *Streamer) State(ctx context.Context) map[string]any {
	var ss map[string]any
	if inst := s.readyInstance(); inst != nil {
		var err error
		if ss, err = s.fetchState(ctx); err != nil {
			s.log.Debug("streamer state", "err", err)
		}
	}
	return s.compose(ss)
}

// compose builds the state around ss, ustreamer's /state result or nil.
func (s *Streamer) compose(ss map[string]any) map[string]any {
	c, cerr := s.cfg.Video.Capture()
	v := s.cfg.Video.Signal()
	s.mu.Lock()
	if cerr == nil {
		s.capture = c
	} else {
		c = s.capture
	}
	params := s.params
	saved := s.saved
	lastErr := s.lastErr
	s.mu.Unlock()
	f := s.features(c.Kind)
	l := Limits{DesiredFPSMin: s.cfg.DesiredFPSMin, DesiredFPSMax: s.cfg.DesiredFPSMax, Resolutions: s.cfg.Resolutions}

	var streamer any // JSON null without a streamer
	applied := params.json(f)
	var own any // this daemon's "h264", null without an encoder
	if s.cfg.H264 != nil {
		own = s.cfg.H264.State()
	}
	if ss != nil {
		if signalAbsent(v) {
			if src, ok := ss["source"].(map[string]any); ok {
				src["online"] = false
			}
		}
		if s.cfg.H264 != nil {
			// ustreamer 6's own "h264" (src/ustreamer/http/server.c),
			// which 4.9 has not: kvmd's applied reads the bitrate and GOP
			// from it, PiKVM's page its online.
			if st := s.cfg.H264.Status(); st.Running {
				ss["h264"] = map[string]any{"bitrate": st.Settings.Bitrate, "gop": st.Settings.GOP, "online": st.Online, "fps": st.FPS}
			}
		}
		streamer = ss
		applyStreamer(applied, ss, f)
	}
	snap := map[string]any{"saved": nil}
	if saved != nil {
		snap["saved"] = map[string]any{"online": saved.Online, "width": saved.Width, "height": saved.Height}
	}
	var capture *CaptureState
	if v != nil && v.Device != nil {
		capture = &CaptureState{Device: *v.Device, Status: v.Status, Signal: v.Signal, Resolution: v.Resolution, FPS: v.FPS}
	}
	return map[string]any{
		"features": f,
		"limits":   l.json(f),
		"params":   params.json(f),
		"applied":  applied,
		"streamer": streamer,
		"snapshot": snap,
		"capture":  capture,
		"error":    problem(lastErr),
		"h264":     own,
	}
}

// features are the capture's features (FeaturesOf) and H.264 when there
// is an encoder.
func (s *Streamer) features(kind string) Features {
	f := FeaturesOf(kind)
	f.H264 = s.cfg.H264 != nil
	return f
}

// problem says in words why no streamer can run, for the state's "error"
// (this daemon's, not kvmd's): nil when one can, or is only restarting.
func problem(err error) any {
	switch {
	case errors.Is(err, ErrNotInstalled):
		return "ustreamer is not installed"
	case errors.Is(err, ErrNoCapture):
		return "no video capture device was found"
	}
	return nil
}

// applyStreamer fills in applied from the streamer's own state, as kvmd's
// Params.get_applied does.
func applyStreamer(applied, ss map[string]any, f Features) {
	if src, ok := ss["source"].(map[string]any); ok {
		if fps, ok := src["desired_fps"].(json.Number); ok {
			if n, err := fps.Int64(); err == nil {
				applied["desired_fps"] = int(n)
			}
		}
		if f.Resolution {
			if r, ok := src["resolution"].(map[string]any); ok {
				applied["resolution"] = fmt.Sprintf("%vx%v", r["width"], r["height"])
			}
		}
	}
	if f.Quality {
		if enc, ok := ss["encoder"].(map[string]any); ok {
			if q, ok := enc["quality"].(json.Number); ok {
				if n, err := q.Int64(); err == nil {
					applied["quality"] = int(n)
				}
			}
		}
	}
	if h, ok := ss["h264"].(map[string]any); ok && f.H264 {
		applied["h264_bitrate"], applied["h264_gop"] = h["bitrate"], h["gop"]
	}
}

// readyInstance is the running streamer, when it answers on its socket
// and the daemon is not stopping it.
func (s *Streamer) readyInstance() *instance {
	s.mu.Lock()
	cur := s.cur
	if !s.usable(cur) {
		cur = nil
	}
	s.mu.Unlock()
	if cur == nil {
		return nil
	}
	select {
	case <-cur.ready:
		select {
		case <-cur.exited:
			return nil
		default:
			return cur
		}
	default:
		return nil
	}
}

// get asks the streamer for path within the request timeout, and returns
// the whole answer.
func (s *Streamer) get(ctx context.Context, path string) (*http.Response, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://ustreamer"+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("User-Agent", "kvmd")
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("streamer: %s: HTTP %d", path, resp.StatusCode)
	}
	return resp, body, nil
}

// fetchState returns the result of the streamer's /state, its numbers
// kept as written.
func (s *Streamer) fetchState(ctx context.Context) (map[string]any, error) {
	_, body, err := s.get(ctx, "/state")
	if err != nil {
		return nil, err
	}
	var env struct {
		OK     bool           `json:"ok"`
		Result map[string]any `json:"result"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&env); err != nil || !env.OK || env.Result == nil {
		return nil, fmt.Errorf("streamer: /state: not ustreamer's answer: %v", err)
	}
	return env.Result, nil
}

// watch publishes the state's changes until ctx ends: every state poll,
// and at once when the streamer starts, stops or changes.
func (s *Streamer) watch(ctx context.Context) {
	subsystem.Poll[map[string]any, map[string]any]{Every: s.cfg.StatePoll, Clock: s.cfg.Clock, Wake: s.note,
		Read: s.State, Changes: s.diff}.Run(ctx, s.changes.Send)
}

// diff keeps st as the last state (Current) and returns the parts of it
// that changed since prev, as kvmd's poll_state does: limits go with a
// change of params or applied; the features only in a full state. The
// first state is no event: clients get it whole when they connect.
func (s *Streamer) diff(prev *map[string]any, st map[string]any) []map[string]any {
	s.mu.Lock()
	s.last = st
	s.mu.Unlock()
	if prev == nil {
		return nil
	}
	diff := map[string]any{}
	for _, k := range stateKeys {
		if k == "features" {
			continue
		}
		old, _ := json.Marshal((*prev)[k])
		cur, _ := json.Marshal(st[k])
		if !bytes.Equal(old, cur) {
			diff[k] = st[k]
		}
	}
	if len(diff) == 0 {
		return nil
	}
	if _, ok := diff["params"]; ok {
		diff["limits"] = st["limits"]
	}
	if _, ok := diff["applied"]; ok {
		diff["limits"] = st["limits"]
	}
	return []map[string]any{diff}
}

// Current returns the last state the watcher saw, whole: what a new
// WebSocket client is sent first. Before the watcher's first look, the
// state without the streamer's own.
func (s *Streamer) Current() map[string]any {
	s.mu.Lock()
	last := s.last
	s.mu.Unlock()
	if last != nil {
		return last
	}
	return s.compose(nil)
}

// SetParams changes the params (kvmd's /streamer/set_params): a running
// streamer restarts with them after the reset delay. The error is a
// *ParamError or one of ErrQualityNotSupported, ErrResolutionNotSupported,
// ErrH264NotSupported; then nothing changed.
func (s *Streamer) SetParams(ch Change) error {
	c, err := s.cfg.Video.Capture()
	s.mu.Lock()
	if err == nil {
		s.capture = c
	} else {
		c = s.capture
	}
	f := s.features(c.Kind)
	l := Limits{DesiredFPSMin: s.cfg.DesiredFPSMin, DesiredFPSMax: s.cfg.DesiredFPSMax, Resolutions: s.cfg.Resolutions}
	p, err := s.params.apply(ch, f, l)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	old := s.params
	s.params = p
	restart := p.ustreamer() != old.ustreamer()
	if restart && s.cur != nil {
		// The reset asked in one step with the change: no client is
		// given the streamer of the old params after this returns.
		s.resetReq = true
	}
	s.mu.Unlock()
	if restart {
		s.log.Info("streamer params changed", "quality", p.Quality, "desired_fps", p.DesiredFPS, "resolution", p.Resolution)
		s.wake(s.kick)
	}
	if p.H264Bitrate != old.H264Bitrate || p.H264GOP != old.H264GOP {
		// A new encoder, not a new ustreamer: the MJPEG clients go on.
		s.cfg.H264.SetSettings(p.H264Bitrate, p.H264GOP)
	}
	if p != old {
		s.wake(s.note)
	}
	return nil
}

// Params returns the current params.
func (s *Streamer) Params() Params {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.params
}

// Hold starts the streamer if need be and waits until it runs: for a
// client that reads it other than over its socket (its raw sink). The
// streamer stays until release is called. Its error is waitReady's:
// ErrNotInstalled, ErrNoCapture, ErrNotRunning.
func (s *Streamer) Hold(ctx context.Context) (release func(), err error) {
	release = s.Acquire()
	if _, err := s.waitReady(ctx); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// Stream opens the streamer's MJPEG stream (its /stream, with the
// client's query: key, extra_headers, advance_headers, dual_final_frames,
// zero_data), starting the streamer first if need be. The caller copies
// the body to its client, closes it and calls release. The stream ends
// when ctx does, or the streamer does.
func (s *Streamer) Stream(ctx context.Context, rawQuery string) (resp *http.Response, release func(), err error) {
	held := s.Acquire()
	defer func() {
		if err != nil {
			held()
		}
	}()
	if _, err := s.waitReady(ctx); err != nil {
		return nil, nil, err
	}
	u := "http://ustreamer/stream"
	if rawQuery != "" {
		u += "?" + rawQuery
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("User-Agent", "kvmd")
	resp, err = s.hc.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrNotRunning, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, nil, fmt.Errorf("%w: /stream: HTTP %d", ErrNotRunning, resp.StatusCode)
	}
	return resp, held, nil
}

// RawSnapshot returns the streamer's /snapshot answer as it is (the
// daemon's /streamer/snapshot, where PiKVM's nginx serves ustreamer's),
// starting the streamer first if need be.
func (s *Streamer) RawSnapshot(ctx context.Context) (*Snapshot, error) {
	release := s.Acquire()
	defer release()
	if _, err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	return s.fetchSnapshot(ctx)
}

// snapshotHeaders are the streamer's headers a snapshot keeps, as kvmd's
// StreamerSnapshot does: X-UStreamer-*, X-Timestamp and the cache headers.
var snapshotHeaders = []string{"X-Timestamp", "Access-Control-Allow-Origin", "Cache-Control", "Pragma", "Expires"}

func (s *Streamer) fetchSnapshot(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SnapshotTimeout)
	defer cancel()
	resp, body, err := s.get(ctx, "/snapshot")
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Header: http.Header{}, Data: body}
	for k, v := range resp.Header {
		// net/http gives the names canonical: X-Ustreamer-Online.
		if strings.HasPrefix(k, "X-Ustreamer-") || slices.Contains(snapshotHeaders, k) {
			snap.Header[k] = v
		}
	}
	snap.Online = resp.Header.Get("X-UStreamer-Online") == "true"
	fmt.Sscan(resp.Header.Get("X-UStreamer-Width"), &snap.Width)
	fmt.Sscan(resp.Header.Get("X-UStreamer-Height"), &snap.Height)
	if snap.Online && signalAbsent(s.cfg.Video.Signal()) {
		snap.Online = false
		snap.Header.Set("X-UStreamer-Online", "false")
	}
	return snap, nil
}

// snapshotPoll is how often Snapshot asks again for a picture of the
// signal after a start.
const snapshotPoll = 100 * time.Millisecond

// Snapshot takes a picture (kvmd's /streamer/snapshot): starting the
// streamer if need be and waiting, within the snapshot timeout, for a
// picture of the signal rather than the placeholder a streamer shows
// while it starts. A picture without a signal is ErrOffline unless
// allowOffline. save keeps it for load.
func (s *Streamer) Snapshot(ctx context.Context, save, load, allowOffline bool) (*Snapshot, error) {
	if load {
		s.mu.Lock()
		saved := s.saved
		s.mu.Unlock()
		if saved == nil {
			return nil, ErrNoSnapshot
		}
		return saved, nil
	}
	release := s.Acquire()
	defer release()
	if _, err := s.waitReady(ctx); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(s.cfg.SnapshotTimeout)
	var snap *Snapshot
	for {
		got, err := s.fetchSnapshot(ctx)
		if err != nil {
			if snap == nil {
				return nil, fmt.Errorf("%w: %w", ErrNotRunning, err)
			}
			break
		}
		snap = got
		if snap.Online || signalAbsent(s.cfg.Video.Signal()) || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(snapshotPoll):
		}
	}
	if !snap.Online && !allowOffline {
		return nil, ErrOffline
	}
	if save {
		s.mu.Lock()
		s.saved = snap
		s.mu.Unlock()
		s.wake(s.note)
	}
	return snap, nil
}

// DeleteSnapshot forgets the saved snapshot.
func (s *Streamer) DeleteSnapshot() {
	s.mu.Lock()
	s.saved = nil
	s.mu.Unlock()
	s.wake(s.note)
}
