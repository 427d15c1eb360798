package vnc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"

	"golang.org/x/image/draw"
)

// maxTightJPEG is the longest JPEG a Tight rectangle can carry: its
// compact length has 22 bits (rfbproto.rst, Tight Encoding).
const maxTightJPEG = 1<<22 - 1

// jpegQuality maps a JPEG Quality Level pseudo-encoding, 0 to 9, to a JPEG
// quality, as kvmd-vnc does (kvmd/apps/vnc/rfb/encodings.py): 10 to 100.
func jpegQuality(level int) int { return (level + 1) * 10 }

// rectHeader appends a rectangle's header: position, size, encoding.
func rectHeader(b []byte, x, y, w, h int, enc int32) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(x))
	b = binary.BigEndian.AppendUint16(b, uint16(y))
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	return binary.BigEndian.AppendUint32(b, uint32(enc))
}

// updateHeader appends a FramebufferUpdate's header for n rectangles.
func updateHeader(b []byte, n int) []byte {
	b = append(b, 0, 0)
	return binary.BigEndian.AppendUint16(b, uint16(n))
}

// tightJPEG appends a Tight rectangle's data for a JPEG: the compression
// control byte of JpegCompression (0x90), the length in one to three
// bytes of seven, seven and eight bits, then the JPEG.
func tightJPEG(b, data []byte) []byte {
	n := len(data)
	b = append(b, 0x90)
	switch {
	case n <= 0x7f:
		b = append(b, byte(n))
	case n <= 0x3fff:
		b = append(b, byte(n)|0x80, byte(n>>7))
	default:
		b = append(b, byte(n)|0x80, byte(n>>7)|0x80, byte(n>>14))
	}
	return append(b, data...)
}

// rawPixels appends img's pixels in the client's pixel format, row by row
// (a Raw rectangle's data). The format passed check.
func rawPixels(b []byte, img image.Image, pf PixelFormat) []byte {
	r := img.Bounds()
	bpp := int(pf.BPP) / 8
	start := len(b)
	b = append(b, make([]byte, r.Dx()*r.Dy()*bpp)...)
	out := b[start:]
	i := 0
	put := func(v uint32) {
		switch {
		case bpp == 1:
			out[i] = byte(v)
		case bpp == 2 && pf.BigEndian:
			binary.BigEndian.PutUint16(out[i:], uint16(v))
		case bpp == 2:
			binary.LittleEndian.PutUint16(out[i:], uint16(v))
		case pf.BigEndian:
			binary.BigEndian.PutUint32(out[i:], v)
		default:
			binary.LittleEndian.PutUint32(out[i:], v)
		}
		i += bpp
	}
	pix := func(r8, g8, b8 uint8) uint32 {
		return uint32(r8)*uint32(pf.RedMax)/255<<pf.RedShift |
			uint32(g8)*uint32(pf.GreenMax)/255<<pf.GreenShift |
			uint32(b8)*uint32(pf.BlueMax)/255<<pf.BlueShift
	}
	switch src := img.(type) {
	case *image.YCbCr:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				yi, ci := src.YOffset(x, y), src.COffset(x, y)
				put(pix(color.YCbCrToRGB(src.Y[yi], src.Cb[ci], src.Cr[ci])))
			}
		}
	case *image.RGBA:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				o := src.PixOffset(x, y)
				put(pix(src.Pix[o], src.Pix[o+1], src.Pix[o+2]))
			}
		}
	default:
		for y := r.Min.Y; y < r.Max.Y; y++ {
			for x := r.Min.X; x < r.Max.X; x++ {
				c := color.RGBAModel.Convert(src.At(x, y)).(color.RGBA)
				put(pix(c.R, c.G, c.B))
			}
		}
	}
	return b
}

// scale returns img drawn at w x h.
func scale(img image.Image, w, h int) image.Image {
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(dst, dst.Bounds(), img, img.Bounds(), draw.Src, nil)
	return dst
}

// encodeJPEG encodes img at quality.
func encodeJPEG(img image.Image, quality int) ([]byte, error) {
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: quality}); err != nil {
		return nil, fmt.Errorf("vnc: encoding JPEG: %w", err)
	}
	return b.Bytes(), nil
}

// extendedDesktopSize appends an ExtendedDesktopSize rectangle: reason
// (0 a change of the server's, 1 an answer to this client's request),
// status (0 done, 1 prohibited), the size, and the one screen.
func extendedDesktopSize(b []byte, reason, status, w, h int) []byte {
	b = rectHeader(b, reason, status, w, h, encExtendedDesktopSize)
	b = append(b, 1, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, 0) // the screen's id
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	return binary.BigEndian.AppendUint32(b, 0) // flags
}
