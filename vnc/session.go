package vnc

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"kvmd/auth"
	"kvmd/hid"
)

// defaultWidth and defaultHeight are the screen's size until a picture
// tells it (kvmd-vnc's).
const (
	defaultWidth  = 800
	defaultHeight = 600
)

// retryFrames is the wait before the picture is asked for again after its
// stream ended (the streamer restarting, no signal).
const retryFrames = time.Second

// serveConn runs one connection to its end.
func (s *Server) serveConn(ctx context.Context, c net.Conn) {
	addr := remoteAddr(c)
	log := s.log.With("addr", addr.String())
	if tc, ok := c.(*net.TCPConn); ok {
		// kvmd-vnc's keepalive: a client gone without a word is noticed
		// in about 20 s.
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 3 * time.Second, Count: 3})
		tc.SetNoDelay(true)
	}
	h := &handshake{s: s, raw: c, conn: c}
	h.deadline(time.Now().Add(s.cfg.HandshakeTimeout))
	id, release, err := s.handshake(ctx, h, addr)
	if err != nil {
		var r *refusal
		switch {
		case errors.As(err, &r):
			if !errors.Is(err, errSilent) {
				h.fail(r.reason)
			}
			args := []any{"user", auth.LogName(id.User), "why", r.reason}
			if r.err != nil {
				args = append(args, "err", r.err)
			}
			log.Info("VNC connection refused", args...)
		case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
			log.Debug("VNC client left during the handshake", "err", err)
		default:
			log.Info("VNC handshake failed", "err", err)
		}
		return
	}
	defer release()
	log = log.With("user", auth.LogName(id.User), "role", id.Role.String())
	ss := &session{s: s, h: h, id: id, log: log, format: defaultFormat, kick: make(chan struct{}, 1), at: [4]int{-1}}
	ss.run(ctx)
}

// handshake runs the connection to an authenticated identity holding its
// share (release gives it back).
func (s *Server) handshake(ctx context.Context, h *handshake, addr netip.Addr) (Identity, func(), error) {
	if err := h.version(); err != nil {
		return Identity{}, nil, err
	}
	select {
	case s.slot <- struct{}{}:
	default:
		return Identity{}, nil, refuse(fmt.Sprintf("Too many VNC connections (at most %d); try again later", s.cfg.MaxClients), nil)
	}
	freeSlot := func() { <-s.slot }
	if err := h.security(); err != nil {
		freeSlot()
		return Identity{}, nil, err
	}
	id, err := h.plain(ctx, addr)
	if id.Close != nil {
		free := freeSlot
		freeSlot = func() { id.Close(); free() }
	}
	if err != nil {
		freeSlot()
		return id, nil, err
	}
	release := freeSlot
	if s.cfg.Hold != nil {
		give, err := s.cfg.Hold(id)
		if err != nil {
			freeSlot()
			return id, nil, refuse(err.Error(), nil)
		}
		release = func() { give(); freeSlot() }
	}
	// SecurityResult: OK.
	if _, err := h.conn.Write([]byte{0, 0, 0, 0}); err != nil {
		release()
		return id, nil, err
	}
	return id, release, nil
}

// session is an authenticated connection: the client's messages read on
// the connection's goroutine, the picture read by another and the updates
// written by a third, all ended together.
type session struct {
	s   *Server
	h   *handshake
	id  Identity
	log *slog.Logger
	kb  *keyboard

	kick chan struct{} // wakes the writer

	mu sync.Mutex
	// What the client asked for (SetPixelFormat, SetEncodings).
	format  PixelFormat
	quality int // the JPEG quality of Tight, 0: no Tight JPEG
	resize  int32
	// requested is set by a FramebufferUpdateRequest, full when it was
	// not incremental; resizeAsked by a SetDesktopSize to answer.
	requested, full, resizeAsked bool
	// frame is the newest picture, seq its number (0: none yet).
	frame Frame
	seq   uint64
	// width and height are the client's framebuffer's.
	width, height int
	// buttons are the pointer's buttons held, as the client last sent
	// them; at is where it last was, on a screen of what size (-1:
	// nowhere yet).
	buttons     byte
	at          [4]int
	inputLogged bool
}

func (ss *session) wake() {
	select {
	case ss.kick <- struct{}{}:
	default:
	}
}

func (ss *session) operator() bool { return ss.id.Role >= auth.RoleOperator && ss.s.cfg.HID != nil }

func (ss *session) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if ss.id.Done != nil {
		stop := context.AfterFunc(ss.id.Done, func() {
			ss.log.Info("VNC connection ended: its credentials no longer let the user in")
			cancel()
		})
		defer stop()
	}
	// Closing the connection ends the reader; ctx ends the others.
	stopClose := context.AfterFunc(ctx, func() { ss.h.raw.Close() })
	defer stopClose()

	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	first := make(chan struct{})
	wg.Go(func() { ss.readFrames(ctx, first) })
	t := time.NewTimer(ss.s.cfg.FirstFrame)
	select {
	case <-first:
	case <-t.C:
	case <-ctx.Done():
	}
	t.Stop()
	ss.mu.Lock()
	ss.width, ss.height = defaultWidth, defaultHeight
	if ss.seq > 0 {
		ss.width, ss.height = ss.frame.Width, ss.frame.Height
	}
	w, h := ss.width, ss.height
	ss.mu.Unlock()
	name := ss.s.cfg.Name
	if !ss.operator() {
		name += " (view only)"
	}
	br := bufio.NewReaderSize(ss.h.conn, 4096)
	if err := ss.h.serverInit(br, w, h, name); err != nil {
		ss.log.Debug("VNC client left before ServerInit", "err", err)
		return
	}
	ss.h.deadline(time.Time{})
	ss.log.Info("VNC client connected", "size", fmt.Sprintf("%dx%d", w, h), "input", ss.operator())
	if ss.operator() {
		ss.kb = newKeyboard(ss.s.cfg.Keymap, func(k hid.Key, press bool) { ss.s.cfg.HID.Key(k, press, false) })
		defer ss.releaseInput()
	}
	wg.Go(func() {
		if err := ss.write(ctx); err != nil && ctx.Err() == nil {
			ss.log.Info("VNC connection ended: writing to the client", "err", err)
		}
		cancel()
	})
	err := ss.read(br)
	switch {
	case ctx.Err() != nil:
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
		ss.log.Info("VNC client disconnected")
	default:
		ss.log.Info("VNC connection ended: the client sent what cannot be read", "err", err)
	}
}

// releaseInput releases what this client holds on the host.
func (ss *session) releaseInput() {
	if ss.kb != nil {
		ss.kb.releaseAll()
	}
	ss.mu.Lock()
	held := ss.buttons
	ss.buttons = 0
	ss.mu.Unlock()
	ss.pointerButtons(held, 0)
}

// readFrames keeps the newest picture, opening the stream again after a
// wait whenever it ends, until ctx ends.
func (ss *session) readFrames(ctx context.Context, first chan struct{}) {
	var once sync.Once
	for ctx.Err() == nil {
		fr, err := ss.s.cfg.Frames.Open(ctx)
		if err == nil {
			stop := context.AfterFunc(ctx, func() { fr.Close() })
			for {
				f, err := fr.Next()
				if err != nil {
					if ctx.Err() == nil {
						ss.log.Debug("VNC picture stream ended", "err", err)
					}
					break
				}
				ss.mu.Lock()
				ss.frame = f
				ss.seq++
				ss.mu.Unlock()
				once.Do(func() { close(first) })
				ss.wake()
			}
			stop()
			fr.Close()
		} else {
			ss.log.Debug("VNC picture unavailable", "err", err)
		}
		t := time.NewTimer(retryFrames)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// read reads the client's messages until an error.
func (ss *session) read(br *bufio.Reader) error {
	buf := make([]byte, 32)
	for {
		m, err := readMsg(br, buf)
		if err != nil {
			return err
		}
		if err := ss.handle(m); err != nil {
			return err
		}
	}
}

func (ss *session) handle(m clientMsg) error {
	switch m.typ {
	case msgSetPixelFormat:
		if err := m.format.check(); err != nil {
			return err
		}
		ss.mu.Lock()
		ss.format = m.format
		ss.mu.Unlock()
	case msgSetEncodings:
		ss.setEncodings(m.encodings)
	case msgFramebufferUpdateRequest:
		ss.mu.Lock()
		ss.requested = true
		ss.full = ss.full || !m.incremental
		ss.mu.Unlock()
		ss.wake()
	case msgSetDesktopSize:
		ss.mu.Lock()
		ss.resizeAsked = true
		ss.mu.Unlock()
		ss.wake()
	case msgKeyEvent:
		if ss.input("key") {
			ss.kb.event(m.keysym, m.down)
		}
	case msgPointerEvent:
		if ss.input("pointer") {
			ss.pointer(m.buttons, int(m.x), int(m.y))
		}
	}
	return nil
}

// input says whether this client's input goes to the host: an operator's
// does; a viewer's is dropped, logged once.
func (ss *session) input(what string) bool {
	if ss.operator() {
		return true
	}
	ss.mu.Lock()
	logged := ss.inputLogged
	ss.inputLogged = true
	ss.mu.Unlock()
	if !logged {
		ss.log.Info("VNC input dropped: this user may only watch", "event", what)
	}
	return false
}

func (ss *session) setEncodings(encs []int32) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.quality, ss.resize = 0, 0
	tight, level := false, -1
	for _, e := range encs {
		switch {
		case e == encTight:
			tight = true
		case e >= encJPEGQualityLowest && e <= encJPEGQualityHighest:
			level = max(level, int(e-encJPEGQualityLowest))
		case e == encExtendedDesktopSize:
			ss.resize = e
		case e == encDesktopSize && ss.resize == 0:
			ss.resize = e
		}
	}
	if tight && level >= 0 {
		ss.quality = jpegQuality(level)
	}
	ss.log.Debug("VNC encodings", "tight_jpeg_quality", ss.quality, "resize", ss.resize, "list", fmt.Sprint(encs))
}

// The pointer's buttons (RFC 6143 section 7.5.5): 1 left, 2 middle, 3
// right, 4 and 5 the wheel up and down, 6 and 7 left and right.
var pointerButtons = []struct {
	bit  byte
	name string
}{{0x01, "left"}, {0x02, "middle"}, {0x04, "right"}}

func (ss *session) pointer(buttons byte, x, y int) {
	ss.mu.Lock()
	w, h := ss.width, ss.height
	old := ss.buttons
	ss.buttons = buttons
	at := [4]int{x, y, w, h}
	moved := at != ss.at
	ss.at = at
	ss.mu.Unlock()
	// A move only when the pointer moved (or the screen changed), as
	// kvmd-vnc: a client sends its position with every button.
	if moved {
		ss.s.cfg.HID.MouseMove(remap(x, w), remap(y, h))
	}
	ss.pointerButtons(old, buttons)
	// A wheel step for each wheel button pressed.
	r := int8(ss.s.cfg.ScrollRate)
	pressed := buttons &^ old
	var d hid.Delta
	switch {
	case pressed&0x08 != 0:
		d.Y = r
	case pressed&0x10 != 0:
		d.Y = -r
	}
	switch {
	case pressed&0x20 != 0:
		d.X = -r
	case pressed&0x40 != 0:
		d.X = r
	}
	if d != (hid.Delta{}) {
		ss.s.cfg.HID.MouseWheel([]hid.Delta{d}, false)
	}
}

// pointerButtons presses and releases the buttons that changed.
func (ss *session) pointerButtons(old, now byte) {
	if old == now || ss.s.cfg.HID == nil {
		return
	}
	for _, pb := range pointerButtons {
		if old&pb.bit != now&pb.bit {
			if b, ok := hid.ButtonByName(pb.name); ok {
				ss.s.cfg.HID.MouseButton(b, now&pb.bit != 0)
			}
		}
	}
}

// remap maps a position on a side of n pixels to hid.MoveMin..MoveMax,
// as kvmd-vnc does (0 and n-1 are the ends).
func remap(v, n int) int {
	if n <= 1 {
		return hid.MoveMin
	}
	v = min(max(v, 0), n-1)
	return hid.MoveMin + v*(hid.MoveMax-hid.MoveMin)/(n-1)
}

// write sends the client an update whenever it asked for one and there is
// something new: a new size, a new picture, or the answer to its
// SetDesktopSize.
func (ss *session) write(ctx context.Context) error {
	var sent uint64
	var dec decoded
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ss.kick:
		}
		ss.mu.Lock()
		if !ss.requested || ss.seq == 0 || (!ss.full && ss.seq == sent && !ss.resizeAsked) {
			ss.mu.Unlock()
			continue
		}
		f, seq, pf, quality, resize := ss.frame, ss.seq, ss.format, ss.quality, ss.resize
		answer := ss.resizeAsked && resize == encExtendedDesktopSize
		ss.resizeAsked = false
		buf = buf[:0]
		if resize != 0 && (f.Width != ss.width || f.Height != ss.height) {
			// The new size alone; the client asks for the picture after.
			ss.width, ss.height = f.Width, f.Height
			buf = updateHeader(buf, 1)
			if resize == encExtendedDesktopSize {
				buf = extendedDesktopSize(buf, 0, 0, f.Width, f.Height)
			} else {
				buf = rectHeader(buf, 0, 0, f.Width, f.Height, encDesktopSize)
			}
			ss.full = true
			ss.requested = false
			ss.mu.Unlock()
			ss.log.Info("VNC desktop resized", "size", fmt.Sprintf("%dx%d", f.Width, f.Height))
			if err := ss.send(buf); err != nil {
				return err
			}
			continue
		}
		w, h := ss.width, ss.height
		ss.requested, ss.full = false, false
		ss.mu.Unlock()
		if answer {
			// SetDesktopSize: the size is the picture's; prohibited.
			buf = updateHeader(buf, 1)
			buf = extendedDesktopSize(buf, 1, 1, w, h)
			if err := ss.send(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
		var err error
		buf, err = ss.picture(buf, f, seq, &dec, pf, quality, w, h)
		if err != nil {
			ss.log.Warn("VNC picture not sent", "err", err)
			ss.mu.Lock()
			ss.requested = true
			ss.mu.Unlock()
			sent = seq
			continue
		}
		if err := ss.send(buf); err != nil {
			return err
		}
		sent = seq
	}
}

// decoded is the last picture decoded, at the client's size.
type decoded struct {
	seq uint64
	img image.Image
}

// picture appends the update of one picture at the client's size w x h:
// Tight's JPEG as the streamer made it when the client takes Tight JPEG
// at this quality or better and the size is the same, else encoded again
// (Tight) or decoded (Raw).
func (ss *session) picture(b []byte, f Frame, seq uint64, dec *decoded, pf PixelFormat, quality, w, h int) ([]byte, error) {
	img := func() (image.Image, error) {
		if dec.img == nil || dec.seq != seq || dec.img.Bounds() != image.Rect(0, 0, w, h) {
			im, err := jpeg.Decode(bytes.NewReader(f.JPEG))
			if err != nil {
				return nil, fmt.Errorf("decoding the picture: %w", err)
			}
			if im.Bounds() != image.Rect(0, 0, w, h) {
				im = scale(im, w, h)
			}
			dec.seq, dec.img = seq, im
		}
		return dec.img, nil
	}
	b = updateHeader(b, 1)
	if quality > 0 {
		data := f.JPEG
		if f.Width != w || f.Height != h || quality < ss.s.passQuality() || len(data) > maxTightJPEG {
			im, err := img()
			if err != nil {
				return nil, err
			}
			if data, err = encodeJPEG(im, quality); err != nil {
				return nil, err
			}
			if len(data) > maxTightJPEG {
				return nil, fmt.Errorf("a JPEG of %d bytes does not fit a Tight rectangle", len(data))
			}
		}
		b = rectHeader(b, 0, 0, w, h, encTight)
		return tightJPEG(b, data), nil
	}
	im, err := img()
	if err != nil {
		return nil, err
	}
	b = rectHeader(b, 0, 0, w, h, encRaw)
	return rawPixels(b, im, pf), nil
}

func (ss *session) send(b []byte) error {
	ss.h.raw.SetWriteDeadline(time.Now().Add(ss.s.cfg.WriteTimeout))
	_, err := ss.h.conn.Write(b)
	return err
}

// passQuality is the least JPEG quality a client's Tight may ask for and
// get the streamer's JPEG as it is; below it the picture is encoded again
// at the client's quality.
func (s *Server) passQuality() int {
	if s.cfg.StreamQuality == nil {
		return 0
	}
	return s.cfg.StreamQuality()
}
