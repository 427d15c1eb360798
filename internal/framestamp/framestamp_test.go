package framestamp

import (
	"bytes"
	"image"
	"image/jpeg"
	"testing"
	"time"
)

// TestRoundTrip draws stamps, encodes the picture as a JPEG at a low
// quality, decodes it and reads them back; a picture without one reads
// as none.
func TestRoundTrip(t *testing.T) {
	for _, size := range [][2]int{{1920, 1080}, {640, 480}} {
		w, h := size[0], size[1]
		for _, n := range []uint16{0, 1, 4242, 65535} {
			at := time.Date(2026, 11, 29, 4, 5, 6, 789e6, time.UTC).Add(time.Duration(n) * time.Millisecond)
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			Draw(img, n, at)
			var b bytes.Buffer
			if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 30}); err != nil {
				t.Fatal(err)
			}
			dec, err := jpeg.Decode(&b)
			if err != nil {
				t.Fatal(err)
			}
			y := dec.(*image.YCbCr)
			gn, ms, ok := Read(y.Y, y.YStride, w, h)
			if !ok || gn != n || ms != uint32(at.UnixMilli()) {
				t.Errorf("%dx%d: read %d %d %v, want %d %d", w, h, gn, ms, ok, n, uint32(at.UnixMilli()))
			}
			if d := Since(ms, at.Add(25*time.Millisecond)); d != 25*time.Millisecond {
				t.Errorf("Since = %v, want 25ms", d)
			}
		}
		blank := make([]byte, w*h)
		if _, _, ok := Read(blank, w, w, h); ok {
			t.Errorf("%dx%d: a blank picture has a stamp", w, h)
		}
	}
}
