package demo

import (
	"image"
	"image/color"
	"image/draw"
	"sync/atomic"
	"time"

	xdraw "golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"kvmd/internal/colorbars"
	"kvmd/internal/framestamp"
)

// The demo's capture: what its fake capture device reports (1080p60), and
// the picture its stand-in streamer serves.
const (
	pictureWidth  = 1920
	pictureHeight = 1080
)

// Picture draws the demo's picture at t: colour bars over two thirds of
// the frame, and below them a band with the words "kvmd demo", the clock,
// and a square that moves one step a second, so that a newcomer sees the
// console is live.
func Picture(t time.Time, w, h int) image.Image {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	barsH := h * 2 / 3
	// vivid's bars, so that the demo's console looks like the booted
	// test's.
	colorbars.Draw(img, image.Rect(0, 0, w, barsH))
	draw.Draw(img, image.Rect(0, barsH, w, h), image.NewUniform(color.RGBA{16, 16, 40, 255}), image.Point{}, draw.Src)
	// The moving square: a step a second across the band.
	step := w / 60
	x := int(t.Unix()%60) * step
	draw.Draw(img, image.Rect(x, h-step, x+step, h), image.NewUniform(color.RGBA{255, 200, 0, 255}), image.Point{}, draw.Src)
	scale := max(1, h/240)
	text(img, "kvmd demo: a generated picture, not a capture device", w/20, barsH+h/12, scale)
	text(img, t.Format("2006-01-02 15:04:05"), w/20, barsH+h/12+20*scale, scale)
	return img
}

// text writes s in white with the 7x13 bitmap font, scale times its size,
// its top left at x, y.
func text(dst *image.RGBA, s string, x, y, scale int) {
	face := basicfont.Face7x13
	small := image.NewRGBA(image.Rect(0, 0, font.MeasureString(face, s).Ceil(), face.Height))
	d := font.Drawer{Dst: small, Src: image.White, Face: face, Dot: fixed.P(0, face.Ascent)}
	d.DrawString(s)
	r := image.Rect(x, y, x+small.Bounds().Dx()*scale, y+small.Bounds().Dy()*scale)
	xdraw.NearestNeighbor.Scale(dst, r, small, small.Bounds(), xdraw.Over, nil)
}

// StampedPicture returns a source of the demo's picture with each
// picture's number and the time it is drawn written into it
// (framestamp), for make bench's latency through the daemon
// (KVMD_DEMO_STAMP=1).
func StampedPicture() func(t time.Time, w, h int) image.Image {
	var n atomic.Uint32
	return func(t time.Time, w, h int) image.Image {
		img := Picture(t, w, h).(*image.RGBA)
		framestamp.Draw(img, uint16(n.Add(1)), time.Now())
		return img
	}
}
