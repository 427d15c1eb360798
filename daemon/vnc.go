package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"image/jpeg"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"strconv"
	"strings"
	"sync"

	"kvmd/auth"
	"kvmd/hid"
	"kvmd/httpd"
	"kvmd/streamer"
	"kvmd/vnc"
)

// checkVNC checks the VNC settings: a TCP address, a certificate for
// VeNCrypt's TLS, a keymap the daemon has.
func (c *Config) checkVNC() error {
	if c.VNCListen == "" {
		return nil
	}
	if strings.HasPrefix(c.VNCListen, "unix:") {
		return errors.New("--vnc-listen takes a TCP address (host:port, or :5900)")
	}
	if c.TLSCert == "" {
		return errors.New("--vnc-listen needs --tls-cert and --tls-key: a VNC client sends its password inside TLS (VeNCrypt)")
	}
	if _, err := hid.BuiltinKeymaps().Get(c.VNCKeymap); err != nil {
		return fmt.Errorf("--vnc-keymap: %w", err)
	}
	if c.VNCMaxClients < 1 {
		return errors.New("--vnc-max-clients must be at least 1")
	}
	return nil
}

// addVNC adds the VNC server on --vnc-listen, when set: the daemon's
// credentials and shares (srv), its keyboard and mouse, the streamer's
// picture. Its listener is opened now, so that a taken address fails the
// start.
func addVNC(sup *Supervisor, cfg Config, m *machine, srv *httpd.Server, a *auth.Authenticator, keys *hid.HID, st *streamer.Streamer, tlsConf *tls.Config, log *slog.Logger) error {
	if cfg.VNCListen == "" {
		return nil
	}
	km, err := keys.Keymaps().Get(cfg.VNCKeymap)
	if err != nil {
		return fmt.Errorf("--vnc-keymap: %w", err)
	}
	v, err := vnc.New(vnc.Config{
		TLS:  tlsConf,
		Auth: vnc.Sessions{Auth: a},
		Hold: func(id vnc.Identity) (func(), error) { return srv.HoldVNC(id.User, id.Role) },
		// The streamer's JPEG frames, with their size (extra_headers).
		Frames: mjpegSource{st},
		HID:    keys, Keymap: km,
		StreamQuality: func() int { return st.Params().Quality },
		Name:          "kvmd on " + m.hostName(), MaxClients: cfg.VNCMaxClients, Log: log,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.VNCListen)
	if err != nil {
		return fmt.Errorf("--vnc-listen: %w", err)
	}
	log.Info("VNC listening", "addr", ln.Addr().String(), "keymap", km.Name)
	sup.Add(Child{Name: "vnc", Restart: Temporary, Run: Loop(func(ctx context.Context) {
		if err := v.Serve(ctx, ln); err != nil {
			log.Error("VNC server stopped", "err", err)
		}
	})})
	return nil
}

// maxFrame bounds one JPEG of the stream.
const maxFrame = 16 << 20

// mjpegSource reads the streamer's MJPEG stream (multipart, one JPEG a
// part, X-UStreamer-Width and -Height with extra_headers=1).
type mjpegSource struct{ st httpd.Streamer }

func (m mjpegSource) Open(ctx context.Context) (vnc.Frames, error) {
	resp, release, err := m.st.Stream(ctx, "extra_headers=1")
	if err != nil {
		return nil, err
	}
	_, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		resp.Body.Close()
		release()
		return nil, fmt.Errorf("the stream is not multipart: %q", resp.Header.Get("Content-Type"))
	}
	return &mjpegFrames{mr: multipart.NewReader(resp.Body, params["boundary"]), body: resp.Body, release: release}, nil
}

type mjpegFrames struct {
	mr      *multipart.Reader
	body    io.Closer
	release func()
	once    sync.Once
}

func (f *mjpegFrames) Next() (vnc.Frame, error) {
	p, err := f.mr.NextPart()
	if err != nil {
		return vnc.Frame{}, err
	}
	data, err := io.ReadAll(io.LimitReader(p, maxFrame+1))
	if err != nil {
		return vnc.Frame{}, err
	}
	if len(data) > maxFrame {
		return vnc.Frame{}, fmt.Errorf("a frame of more than %d bytes", maxFrame)
	}
	fr := vnc.Frame{JPEG: data}
	fr.Width, _ = strconv.Atoi(p.Header.Get("X-UStreamer-Width"))
	fr.Height, _ = strconv.Atoi(p.Header.Get("X-UStreamer-Height"))
	if fr.Width <= 0 || fr.Height <= 0 {
		c, err := jpeg.DecodeConfig(bytes.NewReader(data))
		if err != nil {
			return vnc.Frame{}, fmt.Errorf("a frame that is no JPEG: %w", err)
		}
		fr.Width, fr.Height = c.Width, c.Height
	}
	return fr, nil
}

func (f *mjpegFrames) Close() error {
	f.once.Do(func() {
		f.body.Close()
		f.release()
	})
	return nil
}
