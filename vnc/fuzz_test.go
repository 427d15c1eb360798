package vnc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"kvmd/hid"
)

// FuzzReadMsg: any bytes from a client are read as whole messages until
// one cannot be, which is ErrProtocol or a cut stream; never a panic, and
// nothing allocated beyond a message's bounds. Its key events, typed on an
// en-us host, never press a key already down nor release one that is up,
// and once released all, nothing is held.
func FuzzReadMsg(f *testing.F) {
	km, err := hid.BuiltinKeymaps().Get("en-us")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte{msgKeyEvent, 1, 0, 0, 0, 0, 0, 'a'})
	f.Add(append([]byte{msgSetPixelFormat, 0, 0, 0}, defaultFormat.bytes()...))
	f.Add(binary.BigEndian.AppendUint32([]byte{msgSetEncodings, 0, 0, 2}, uint32(encTight)))
	f.Add([]byte{msgFramebufferUpdateRequest, 1, 0, 0, 0, 0, 2, 128, 1, 224})
	f.Add([]byte{msgPointerEvent, 9, 0, 10, 0, 20})
	f.Add([]byte{msgClientCutText, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe, 'h', 'i'})
	f.Add(append([]byte{msgSetDesktopSize, 0, 4, 0, 3, 0, 1, 0}, make([]byte, 16)...))
	f.Add([]byte{255, 0, 0, 1})
	// Shift, then A and a dead key held, Shift released, A released.
	f.Add([]byte{4, 1, 0, 0, 0, 0, 0xff, 0xe1, 4, 1, 0, 0, 0, 0, 0, 'A', 4, 1, 0, 0, 0, 0, 0xfe, 0x52,
		4, 0, 0, 0, 0, 0, 0xff, 0xe1, 4, 0, 0, 0, 0, 0, 0, 'A'})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		buf := make([]byte, 32)
		down := map[hid.Key]bool{}
		kb := newKeyboard(km, func(k hid.Key, press bool) {
			if down[k] == press {
				t.Fatalf("%s pressed %v twice in a row", k.Name, press)
			}
			down[k] = press
		})
		for {
			m, err := readMsg(r, buf)
			if err != nil {
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v: neither a protocol error nor a cut stream", err)
				}
				kb.releaseAll()
				for k, d := range down {
					if d {
						t.Fatalf("%s held after releaseAll", k.Name)
					}
				}
				return
			}
			if m.typ == msgKeyEvent {
				kb.event(m.keysym, m.down)
			}
			if len(m.encodings) > maxEncodings {
				t.Fatalf("%d encodings", len(m.encodings))
			}
			if m.typ == msgSetPixelFormat {
				m.format.check() // must not panic on any format
			}
		}
	})
}
