package streamer

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"sync"

	"golang.org/x/image/draw"
)

// Snapshot is one picture of the streamer: kvmd's StreamerSnapshot.
type Snapshot struct {
	// Online says the picture is of a signal (the streamer's
	// X-UStreamer-Online, false where the daemon sees no signal).
	Online        bool
	Width, Height int
	// Header holds the streamer's headers a snapshot answer carries on:
	// X-UStreamer-*, X-Timestamp and its cache headers.
	Header http.Header
	// Data is the JPEG.
	Data []byte
}

// previewCache keeps the last preview made, as kvmd's lru_cache(maxsize=1)
// on make_preview does: a page that polls a preview costs one scaling per
// picture.
type previewCache struct {
	mu        sync.Mutex
	src       *Snapshot
	w, h, q   int
	data      []byte
	computing sync.Mutex
}

// Preview returns snap scaled down to fit maxWidth x maxHeight, keeping
// its aspect ratio and never enlarging it, as JPEG at quality: kvmd's
// make_preview (PIL's thumbnail). Both bounds 0 mean a fifth of the
// picture's size; one of them 0, the picture's own.
func (s *Streamer) Preview(snap *Snapshot, maxWidth, maxHeight, quality int) ([]byte, error) {
	if maxWidth < 0 || maxHeight < 0 || quality < 1 || quality > 100 {
		return nil, fmt.Errorf("streamer: preview %dx%d at quality %d", maxWidth, maxHeight, quality)
	}
	if maxWidth == 0 && maxHeight == 0 {
		maxWidth, maxHeight = snap.Width/5, snap.Height/5
	} else {
		if maxWidth == 0 || maxWidth > snap.Width {
			maxWidth = snap.Width
		}
		if maxHeight == 0 || maxHeight > snap.Height {
			maxHeight = snap.Height
		}
	}
	if maxWidth == snap.Width && maxHeight == snap.Height {
		return snap.Data, nil
	}
	c := &s.preview
	c.computing.Lock() // one scaling at a time: a board has little CPU
	defer c.computing.Unlock()
	c.mu.Lock()
	if c.src == snap && c.w == maxWidth && c.h == maxHeight && c.q == quality {
		data := c.data
		c.mu.Unlock()
		return data, nil
	}
	c.mu.Unlock()
	data, err := scaleJPEG(snap.Data, maxWidth, maxHeight, quality)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.src, c.w, c.h, c.q, c.data = snap, maxWidth, maxHeight, quality, data
	c.mu.Unlock()
	return data, nil
}

// scaleJPEG decodes a JPEG, fits it into maxW x maxH (aspect kept, never
// larger) and encodes it again.
func scaleJPEG(data []byte, maxW, maxH, quality int) ([]byte, error) {
	src, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("streamer: decoding the snapshot: %w", err)
	}
	w, h := fitInto(src.Bounds().Dx(), src.Bounds().Dy(), maxW, maxH)
	dst := image.NewRGBA(image.Rect(0, 0, w, h))
	// Catmull-Rom, a bicubic filter widened when shrinking, is close to the
	// Lanczos filter PIL's thumbnail uses.
	draw.CatmullRom.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, dst, &jpeg.Options{Quality: quality}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// fitInto returns w x h scaled to fit maxW x maxH, aspect kept, at least
// 1 x 1, never larger than it was (PIL's Image.thumbnail).
func fitInto(w, h, maxW, maxH int) (int, int) {
	if w <= maxW && h <= maxH {
		return w, h
	}
	// The side that must shrink more decides.
	if w*maxH > h*maxW {
		return maxW, max(1, (h*maxW+w/2)/w)
	}
	return max(1, (w*maxH+h/2)/h), maxH
}
