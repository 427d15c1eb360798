package streamer

import (
	"bytes"
	"fmt"
	"image"
	"image/jpeg"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"

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
// on make_preview does, by the picture's bytes (each request takes its own
// snapshot, mostly of the same picture) and the preview's size and
// quality: a page that polls a preview costs one scaling per picture.
// Previews asked for at once of one picture are one scaling that all wait
// for; others are scaled side by side, as many at once as the machine has
// cores (each holds a decoded picture): they were made one at a time,
// 300 of them in 20 s.
type previewCache struct {
	mu       sync.Mutex
	last     *preview
	inflight []*preview
	// slots bounds the scalings at once; made on first use.
	slots chan struct{}
	// scale makes a preview (scaleJPEG; tests count or hold it), scaled
	// counts the scalings.
	scale  func(data []byte, w, h, q int) ([]byte, error)
	scaled atomic.Int64
}

// preview is one preview, made or being made.
type preview struct {
	src     []byte
	w, h, q int
	done    chan struct{} // closed once data and err are set
	data    []byte
	err     error
}

func (p *preview) is(src []byte, w, h, q int) bool {
	return p.w == w && p.h == h && p.q == q && bytes.Equal(p.src, src)
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
	return s.preview.get(snap.Data, maxWidth, maxHeight, quality)
}

// get returns the preview of src at w x h and q: the last one made, the
// one being made, or a new one.
func (c *previewCache) get(src []byte, w, h, q int) ([]byte, error) {
	c.mu.Lock()
	if c.last != nil && c.last.is(src, w, h, q) {
		data := c.last.data
		c.mu.Unlock()
		return data, nil
	}
	for _, p := range c.inflight {
		if p.is(src, w, h, q) {
			c.mu.Unlock()
			<-p.done
			return p.data, p.err
		}
	}
	p := &preview{src: src, w: w, h: h, q: q, done: make(chan struct{})}
	c.inflight = append(c.inflight, p)
	if c.slots == nil {
		c.slots = make(chan struct{}, runtime.GOMAXPROCS(0))
	}
	if c.scale == nil {
		c.scale = scaleJPEG
	}
	slots, scale := c.slots, c.scale
	c.mu.Unlock()

	slots <- struct{}{}
	p.data, p.err = scale(src, w, h, q)
	<-slots
	c.scaled.Add(1)

	c.mu.Lock()
	c.inflight = slices.DeleteFunc(c.inflight, func(o *preview) bool { return o == p })
	if p.err == nil {
		c.last = p
	}
	c.mu.Unlock()
	close(p.done)
	return p.data, p.err
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
