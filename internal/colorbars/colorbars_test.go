package colorbars

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"testing"
)

func bars(w, h int, cols [][3]int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		c := cols[x*len(cols)/w]
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(c[0]), uint8(c[1]), uint8(c[2]), 255})
		}
	}
	return img
}

func TestCheck(t *testing.T) {
	// The bars drawn at 10, 20 in a larger screenshot.
	shot := image.NewRGBA(image.Rect(0, 0, 900, 500))
	pic := bars(800, 450, Bars75)
	for x := range 800 {
		for y := range 450 {
			shot.Set(10+x, 20+y, pic.At(x, y))
		}
	}
	if _, err := Check(shot, [4]float64{10, 20, 800, 450}, .5); err != nil {
		t.Errorf("the bars: %v", err)
	}
	// Off by a bar's width: wrong.
	if _, err := Check(shot, [4]float64{110, 20, 800, 450}, .5); err == nil {
		t.Error("the bars shifted by one passed")
	}
	// A black picture, a grey placeholder, the bars reversed: wrong.
	for name, img := range map[string]image.Image{
		"black": bars(800, 450, [][3]int{{0, 0, 0}}),
		"grey":  bars(800, 450, [][3]int{{128, 128, 128}}),
	} {
		if _, err := Check(img, [4]float64{0, 0, 800, 450}, .5); err == nil {
			t.Errorf("%s passed", name)
		}
	}
	rev := make([][3]int, len(Bars75))
	for i := range Bars75 {
		rev[i] = Bars75[len(Bars75)-1-i]
	}
	if _, err := Check(bars(800, 450, rev), [4]float64{0, 0, 800, 450}, .5); err == nil {
		t.Error("the bars reversed passed")
	}
}

// TestCheckWholeJPEG: the bars through a JPEG at quality 80 (ustreamer's
// default) pass over the whole picture; a grey frame of the same size,
// which jpeg.DecodeConfig alone took for a snapshot, does not.
func TestCheckWholeJPEG(t *testing.T) {
	enc := func(img image.Image) image.Image {
		var b bytes.Buffer
		if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}); err != nil {
			t.Fatal(err)
		}
		out, err := jpeg.Decode(&b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	if _, err := CheckWhole(enc(bars(640, 480, Bars75)), .6); err != nil {
		t.Errorf("the bars as a JPEG: %v", err)
	}
	if _, err := CheckWhole(enc(bars(640, 480, [][3]int{{128, 128, 128}})), .6); err == nil {
		t.Error("a grey JPEG passed")
	}
}

// TestDraw: the bars drawn into part of a picture are what Check finds
// there, and not beside it.
func TestDraw(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 900, 500))
	Draw(img, image.Rect(10, 20, 810, 470))
	if _, err := Check(img, [4]float64{10, 20, 800, 450}, .5); err != nil {
		t.Errorf("the bars drawn: %v", err)
	}
	if _, err := Check(img, [4]float64{110, 20, 800, 450}, .5); err == nil {
		t.Error("the bars drawn, shifted by one, passed")
	}
}
