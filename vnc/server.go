package vnc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"kvmd/auth"
	"kvmd/hid"
)

// Frame is one picture of the screen: a JPEG of Width x Height pixels.
type Frame struct {
	JPEG          []byte
	Width, Height int
}

// FrameSource gives the screen's pictures.
type FrameSource interface {
	// Open starts a stream of pictures, which ends with ctx or Close.
	Open(ctx context.Context) (Frames, error)
}

// Frames is a stream of pictures.
type Frames interface {
	// Next blocks for the next picture; its JPEG is the caller's.
	Next() (Frame, error)
	Close() error
}

// HID is the host's keyboard and mouse (package hid's *HID).
type HID interface {
	Key(k hid.Key, press, finish bool)
	MouseButton(b hid.Button, press bool)
	// MouseMove moves the absolute mouse to x, y in hid.MoveMin..MoveMax.
	MouseMove(x, y int)
	MouseWheel(deltas []hid.Delta, squash bool)
}

// Identity is who a connection authenticated as.
type Identity struct {
	User string
	Role auth.Role
	// Done ends when the credential no longer lets the user in (the
	// user removed, given another password or role): the connection
	// ends with it. Nil: never.
	Done context.Context
	// Close, when set, is called when the connection ends (or is
	// refused after the password was right).
	Close func()
}

// Authenticator checks a user name and password sent through VeNCrypt's
// Plain, from addr. Its errors are package auth's: auth.ErrForbidden,
// *auth.RateLimitedError, auth.ErrUnavailable; the client is told which.
type Authenticator interface {
	Authenticate(ctx context.Context, user, passwd string, addr netip.Addr) (Identity, error)
}

// Config is what New needs. Zero durations and counts take the defaults.
type Config struct {
	// TLS is the server's certificate: VeNCrypt's X509Plain runs TLS
	// with it before the password is sent. Required.
	TLS  *tls.Config
	Auth Authenticator
	// Hold, when set, takes the identity's share of the long-lived
	// connections (the daemon's per-user shares) for the connection's
	// life; a refusal's Error() is the reason the client is shown.
	Hold func(id Identity) (release func(), err error)
	// Frames is the picture.
	Frames FrameSource
	// HID and Keymap, when set, take operators' input: keysyms typed
	// through Keymap, the pointer on the absolute mouse.
	HID    HID
	Keymap Keymap
	// StreamQuality, when set, is the JPEG quality of the streamer's
	// pictures: a Tight client that asks for less gets the picture
	// encoded again at its quality; otherwise the streamer's JPEG goes
	// as it is.
	StreamQuality func() int
	// Name is the desktop's name the client shows (default "kvmd").
	Name string
	// MaxClients bounds the connections at once (DefaultMaxClients).
	MaxClients int
	// HandshakeTimeout bounds everything before the first picture can be
	// asked for: version, TLS, password (default 30 s, kvmd-vnc's TLS
	// timeout). WriteTimeout cuts a client that takes no update for that
	// long (default 20 s). FirstFrame is how long the server waits for
	// the first picture to tell its size (default 5 s; then 800x600
	// until one comes).
	HandshakeTimeout, WriteTimeout, FirstFrame time.Duration
	// ScrollRate is the wheel's step for each wheel button press
	// (default 4, kvmd-vnc's scroll_rate).
	ScrollRate int
	Log        *slog.Logger
}

// Server is the VNC server. Create it with New; Serve runs it.
type Server struct {
	cfg  Config
	log  *slog.Logger
	slot chan struct{}

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// DefaultMaxClients is Config.MaxClients's default: kvmd-vnc's.
const DefaultMaxClients = 10

// maxPending is how many connections may be open beyond MaxClients: those
// in their handshake, and those refused while they are told why.
const maxPending = 8

// ErrNoTLS is New's error without a certificate: passwords never go in
// the clear.
var ErrNoTLS = errors.New("vnc: VeNCrypt needs a TLS certificate")

// New returns a server for cfg.
func New(cfg Config) (*Server, error) {
	if cfg.TLS == nil || len(cfg.TLS.Certificates) == 0 && cfg.TLS.GetCertificate == nil {
		return nil, ErrNoTLS
	}
	if cfg.Auth == nil || cfg.Frames == nil {
		return nil, errors.New("vnc: Config needs Auth and Frames")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.HandshakeTimeout, 30*time.Second)
	def(&cfg.WriteTimeout, 20*time.Second)
	def(&cfg.FirstFrame, 5*time.Second)
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.ScrollRate <= 0 {
		cfg.ScrollRate = 4
	}
	if cfg.Name == "" {
		cfg.Name = "kvmd"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: cfg.Log, slot: make(chan struct{}, cfg.MaxClients), conns: map[net.Conn]struct{}{}}, nil
}

// Serve accepts connections on ln until ctx ends; then it closes ln and
// every connection, and returns once each connection's goroutines are
// gone.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	context.AfterFunc(ctx, func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
	})
	// However Serve returns (its context, or the listener failing), the
	// connections are closed and their goroutines waited for.
	defer wg.Wait()
	defer cancel()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("vnc: accept: %w", err)
		}
		s.mu.Lock()
		if ctx.Err() != nil {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		if len(s.conns) >= s.cfg.MaxClients+maxPending {
			// Connections that hold a place without a word until the
			// handshake's timeout: past the clients and a few in
			// their handshake, a new one is closed at once.
			s.mu.Unlock()
			c.Close()
			s.log.Debug("VNC connection closed at once: too many open", "addr", remoteAddr(c).String())
			continue
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		wg.Go(func() {
			defer func() {
				s.mu.Lock()
				delete(s.conns, c)
				s.mu.Unlock()
				c.Close()
			}()
			s.serveConn(ctx, c)
		})
	}
}

// Clients is the count of connections open.
func (s *Server) Clients() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// remoteAddr is a connection's client address, for the brute-force
// limiter and the log.
func remoteAddr(c net.Conn) netip.Addr {
	if ap, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}
