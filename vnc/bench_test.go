package vnc

import (
	"bytes"
	"image/jpeg"
	"testing"
)

// BenchmarkPicture is the server's work for one 1920x1080 picture: the
// stream's JPEG passed through in Tight, encoded again at a lower
// quality, decoded for Raw.
func BenchmarkPicture(b *testing.B) {
	var src bytes.Buffer
	if err := jpeg.Encode(&src, bars(1920, 1080), &jpeg.Options{Quality: 80}); err != nil {
		b.Fatal(err)
	}
	f := Frame{JPEG: src.Bytes(), Width: 1920, Height: 1080}
	s := &Server{cfg: Config{StreamQuality: func() int { return 80 }}}
	ss := &session{s: s}
	for _, bb := range []struct {
		name    string
		quality int
	}{{"tight-pass", 90}, {"tight-encode-20", 20}, {"raw", 0}} {
		b.Run(bb.name, func(b *testing.B) {
			var buf []byte
			for i := 0; b.Loop(); i++ {
				var dec decoded // each picture a new one
				var err error
				buf, err = ss.picture(buf[:0], f, uint64(i+1), &dec, defaultFormat, bb.quality, 1920, 1080)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(buf)))
		})
	}
}
