// Package screen checks what a browser drew of the host's screen: that a
// screenshot shows a known test picture where the picture is, not a blank
// or a placeholder. The check itself is kvmd/internal/colorbars', which
// the booted test also holds ustreamer's snapshots to.
package screen

import (
	"bytes"
	"image/png"

	"kvmd/internal/colorbars"
)

// Bars75 are vivid's 75 % colour bars, left to right (colorbars.Bars75).
var Bars75 = colorbars.Bars75

// Tolerance is how far a channel may be from the bar's (colorbars.Tolerance).
const Tolerance = colorbars.Tolerance

// CheckBars decodes a PNG screenshot and checks that the picture drawn in
// rect (x, y, width, height, in the screenshot's pixels) has the bars
// across it at the height frac of it (0 the top, 1 the bottom). It
// returns the colours found.
func CheckBars(pngData []byte, rect [4]float64, frac float64) ([][3]int, error) {
	img, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		return nil, err
	}
	return colorbars.Check(img, rect, frac)
}
