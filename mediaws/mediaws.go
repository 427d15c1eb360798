// Package mediaws is PiKVM's Direct H.264 over a WebSocket: kvmd's media
// server (kvmd/apps/media/server.py in github.com/pikvm/kvmd, read at
// f14596e8), as PiKVM's KVM page (web/share/js/kvm/stream_media.js) and
// scripts speak it at /api/media/ws.
//
// Two modes:
//   - the page's: the server sends the "media" event (the formats it
//     has: H.264, its profile-level-id), the client answers with a
//     "start" event for video in H.264, and each picture then comes as a
//     binary message of byte 1, a key-frame byte (1 or 0), and the
//     picture's H.264 in Annex B form. A binary message 0 from the
//     client is a ping, answered with 255;
//   - the "pure" one (?video=h264), for scripts: no event, no start; each
//     binary message is a picture's H.264 as it is, and pings are not
//     answered.
//
// In both, a binary message 1 from the client asks for a key frame. The
// first picture a client gets is a key frame; one too slow for the
// pictures loses them until the next key frame.
package mediaws

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"

	"kvmd/h264"
)

// ProfileLevelID is the profile-level-id the "media" event gives, kvmd's
// ("42E01F", Constrained Baseline at level 3.1), whose "avc1." codec
// string PiKVM's page configures its decoder with; the decoder takes
// the level of the stream's own SPS.
const ProfileLevelID = "42E01F"

// Info is the "media" event, and GET /api/media's result: the formats
// there are, kvmd's shape.
func Info() map[string]any {
	return map[string]any{"video": map[string]any{"h264": map[string]any{"profile_level_id": ProfileLevelID}}}
}

// Kind is what a client's message is.
type Kind uint8

// The client's messages.
const (
	Unknown Kind = iota
	// Ping is a binary message 0.
	Ping
	// Key is a binary message 1: a key frame, please.
	Key
	// Start is the "start" event for H.264 video.
	Start
)

// Parse reads a client's message (binary or text).
func Parse(binary bool, msg []byte) Kind {
	if binary {
		if len(msg) >= 1 {
			switch msg[0] {
			case 0:
				return Ping
			case 1:
				return Key
			}
		}
		return Unknown
	}
	var ev struct {
		EventType string `json:"event_type"`
		Event     struct {
			Type   string `json:"type"`
			Format string `json:"format"`
		} `json:"event"`
	}
	if json.Unmarshal(msg, &ev) != nil || ev.EventType != "start" {
		return Unknown
	}
	if ev.Event.Type == "video" && ev.Event.Format == "h264" {
		return Start
	}
	return Unknown
}

// Frame is the binary message of a picture in the page's mode.
func Frame(u h264.Unit) []byte {
	b := make([]byte, 2, 2+len(u.Data))
	b[0] = 1
	if u.Key {
		b[1] = 1
	}
	return append(b, u.Data...)
}

// Conn is the WebSocket, as the session sees it: Write may be called
// from two goroutines at once (the pictures, the answers to pings).
type Conn interface {
	Read(ctx context.Context) (binary bool, msg []byte, err error)
	Write(ctx context.Context, binary bool, msg []byte) error
}

// Source gives the H.264 (package h264's Pipeline).
type Source interface {
	Subscribe() *h264.Sub
}

// ErrWrite is a write to the client that failed: it left, or took
// nothing for the write timeout.
var ErrWrite = errors.New("mediaws: write failed")

// Serve runs a client's session until ctx ends, the client leaves or a
// write fails. pure is the scripts' mode. It subscribes to src at the
// start (pure) or at the client's "start", and ends the subscription.
func Serve(ctx context.Context, c Conn, src Source, pure bool, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !pure {
		ev, _ := json.Marshal(map[string]any{"event_type": "media", "event": Info()})
		if err := c.Write(ctx, false, ev); err != nil {
			return errors.Join(ErrWrite, err)
		}
	}
	// The reader: pings, key requests and the start; it ends with the
	// connection (a Read error: the client left, or ctx ended).
	start := make(chan struct{})
	keys := make(chan struct{}, 1)
	readErr := make(chan error, 1)
	go func() {
		started := pure
		for {
			binary, msg, err := c.Read(ctx)
			if err != nil {
				readErr <- err
				return
			}
			switch Parse(binary, msg) {
			case Ping:
				if !pure {
					if err := c.Write(ctx, true, []byte{255}); err != nil {
						readErr <- errors.Join(ErrWrite, err)
						return
					}
				}
			case Key:
				select {
				case keys <- struct{}{}:
				default:
				}
			case Start:
				if !started {
					started = true
					close(start)
				}
			}
		}
	}()
	if !pure {
		select {
		case <-start:
		case err := <-readErr:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sub := src.Subscribe()
	defer sub.Close()
	log.Info("Direct H.264 client started", "pure", pure)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			return err
		case <-keys:
			sub.RequestKey()
		case u := <-sub.C():
			msg := u.Data
			if !pure {
				msg = Frame(u)
			}
			if err := c.Write(ctx, true, msg); err != nil {
				return errors.Join(ErrWrite, err)
			}
		}
	}
}
