package vnc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// FuzzReadMsg: any bytes from a client are read as whole messages until
// one cannot be, which is ErrProtocol or a cut stream; never a panic, and
// nothing allocated beyond a message's bounds.
func FuzzReadMsg(f *testing.F) {
	f.Add([]byte{msgKeyEvent, 1, 0, 0, 0, 0, 0, 'a'})
	f.Add(append([]byte{msgSetPixelFormat, 0, 0, 0}, defaultFormat.bytes()...))
	f.Add(binary.BigEndian.AppendUint32([]byte{msgSetEncodings, 0, 0, 2}, uint32(encTight)))
	f.Add([]byte{msgFramebufferUpdateRequest, 1, 0, 0, 0, 0, 2, 128, 1, 224})
	f.Add([]byte{msgPointerEvent, 9, 0, 10, 0, 20})
	f.Add([]byte{msgClientCutText, 0, 0, 0, 0xff, 0xff, 0xff, 0xfe, 'h', 'i'})
	f.Add(append([]byte{msgSetDesktopSize, 0, 4, 0, 3, 0, 1, 0}, make([]byte, 16)...))
	f.Add([]byte{255, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		buf := make([]byte, 32)
		for {
			m, err := readMsg(r, buf)
			if err != nil {
				if !errors.Is(err, ErrProtocol) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Fatalf("error %v: neither a protocol error nor a cut stream", err)
				}
				return
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
