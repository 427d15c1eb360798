package screen

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// TestCheckBars: a PNG screenshot with the bars drawn at 10, 20 passes
// there and not a bar's width off; one that does not decode fails.
func TestCheckBars(t *testing.T) {
	shot := image.NewRGBA(image.Rect(0, 0, 900, 500))
	for x := range 800 {
		c := Bars75[x*len(Bars75)/800]
		for y := range 450 {
			shot.Set(10+x, 20+y, color.RGBA{uint8(c[0]), uint8(c[1]), uint8(c[2]), 255})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, shot); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckBars(b.Bytes(), [4]float64{10, 20, 800, 450}, .5); err != nil {
		t.Errorf("the bars: %v", err)
	}
	if _, err := CheckBars(b.Bytes(), [4]float64{110, 20, 800, 450}, .5); err == nil {
		t.Error("the bars shifted by one passed")
	}
	if _, err := CheckBars([]byte("not a PNG"), [4]float64{0, 0, 1, 1}, .5); err == nil {
		t.Error("a body that is not a PNG passed")
	}
}
