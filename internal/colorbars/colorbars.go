// Package colorbars checks that a picture of the host's screen shows a
// known test picture, vivid's 75 % colour bars, where the picture is: not
// a blank, a placeholder or the wrong pattern. The booted test holds
// ustreamer's snapshots to it, the H.264 tests their decoded pictures, and
// the tools module's screen package the browser's screenshots. It draws
// them too, for the demo's picture and the tests' generated ones. Tests
// and the demo build only.
package colorbars

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
)

// Bars75 are the eight bars of the ITU-R 75 % colour-bar sequence, left to
// right: vivid's default test pattern (drivers/media/common/v4l2-tpg/
// v4l2-tpg-core.c, tpg_get_color: 75 % white, yellow, cyan, green,
// magenta, red, blue, then 100 % black), which the demo's picture copies.
var Bars75 = [][3]int{
	{191, 191, 191}, {191, 191, 0}, {0, 191, 191}, {0, 191, 0},
	{191, 0, 191}, {191, 0, 0}, {0, 0, 191}, {0, 0, 0},
}

// Tolerance is how far a channel may be from the bar's: what a YUV 4:2:2
// capture, a JPEG at quality 80, an H.264 encoding, the browser's scaling
// and a studio-range conversion move a flat colour.
const Tolerance = 40

// Draw draws the bars across r of img.
func Draw(img draw.Image, r image.Rectangle) {
	for i, c := range Bars75 {
		x0 := r.Min.X + i*r.Dx()/len(Bars75)
		x1 := r.Min.X + (i+1)*r.Dx()/len(Bars75)
		draw.Draw(img, image.Rect(x0, r.Min.Y, x1, r.Max.Y), image.NewUniform(color.RGBA{uint8(c[0]), uint8(c[1]), uint8(c[2]), 255}), image.Point{}, draw.Src)
	}
}

// Check checks that the picture drawn in rect of img (x, y, width, height,
// in img's pixels) has the bars across it at the height frac of it (0 the
// top, 1 the bottom). It returns the colours found.
func Check(img image.Image, rect [4]float64, frac float64) ([][3]int, error) {
	x0, y0, w, h := rect[0], rect[1], rect[2], rect[3]
	var got [][3]int
	var bad []string
	for i, want := range Bars75 {
		// The middle of the bar, a few pixels averaged.
		px := int(x0 + w*(float64(i)+0.5)/float64(len(Bars75)))
		py := int(y0 + h*frac)
		var sum [3]int
		n := 0
		for dx := -2; dx <= 2; dx++ {
			for dy := -2; dy <= 2; dy++ {
				r, g, b, _ := img.At(px+dx, py+dy).RGBA()
				sum[0], sum[1], sum[2] = sum[0]+int(r>>8), sum[1]+int(g>>8), sum[2]+int(b>>8)
				n++
			}
		}
		c := [3]int{sum[0] / n, sum[1] / n, sum[2] / n}
		got = append(got, c)
		for k := range 3 {
			if d := c[k] - want[k]; d > Tolerance || d < -Tolerance {
				bad = append(bad, fmt.Sprintf("bar %d at (%d, %d) is %v, want about %v", i, px, py, c, want))
				break
			}
		}
	}
	if len(bad) > 0 {
		return got, fmt.Errorf("not the 75 %% colour bars: %v", bad)
	}
	return got, nil
}

// CheckWhole is Check over the whole of img: a snapshot, whose every pixel
// is the picture.
func CheckWhole(img image.Image, frac float64) ([][3]int, error) {
	b := img.Bounds()
	return Check(img, [4]float64{float64(b.Min.X), float64(b.Min.Y), float64(b.Dx()), float64(b.Dy())}, frac)
}
