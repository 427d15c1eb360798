// Package h264test holds what tests of the H.264 path share: a source of
// generated pictures (vivid's colour bars over a moving square, as JPEG
// at 30 a second), a wrapper that counts a real Opener's encoders, and a
// decoder of H.264 (ffmpeg) into pictures a test can look at.
package h264test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/jpeg"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"kvmd/h264"
	"kvmd/internal/colorbars"
)

// Source gives generated JPEG pictures at FPS a second (30 when 0), of
// the size last set: the colour bars over the top two thirds, and below
// them a white square that moves a step each picture (eight steps), so
// that consecutive pictures differ.
type Source struct {
	FPS int

	mu     sync.Mutex
	w, h   int
	online bool
	cache  map[[3]int][]byte
	opens  atomic.Int32
	open   atomic.Int32 // streams not closed
}

// NewSource returns a source of w x h pictures.
func NewSource(w, h int) *Source {
	return &Source{w: w, h: h, online: true, cache: map[[3]int][]byte{}}
}

// SetSize changes the pictures' size from the next one.
func (s *Source) SetSize(w, h int) {
	s.mu.Lock()
	s.w, s.h = w, h
	s.mu.Unlock()
}

// SetOnline sets the pictures' Online.
func (s *Source) SetOnline(on bool) {
	s.mu.Lock()
	s.online = on
	s.mu.Unlock()
}

// Opens counts the streams opened.
func (s *Source) Opens() int { return int(s.opens.Load()) }

// Streams counts the streams open now.
func (s *Source) Streams() int { return int(s.open.Load()) }

// Picture is the JPEG of picture n at w x h.
func (s *Source) Picture(w, h, n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := [3]int{w, h, n % 8}
	if b, ok := s.cache[k]; ok {
		return b
	}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	colorbars.Draw(img, image.Rect(0, 0, w, h*2/3))
	draw.Draw(img, image.Rect(0, h*2/3, w, h), image.NewUniform(color.RGBA{16, 16, 40, 255}), image.Point{}, draw.Src)
	x := (n % 8) * w / 8
	draw.Draw(img, image.Rect(x, h*2/3, x+w/8, h), image.White, image.Point{}, draw.Src)
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: 80}); err != nil {
		panic(err) // an in-memory encoder of a valid image does not fail
	}
	s.cache[k] = b.Bytes()
	return b.Bytes()
}

// Open starts a stream of pictures, which ends with ctx or Close.
func (s *Source) Open(ctx context.Context) (h264.Pictures, error) {
	s.opens.Add(1)
	s.open.Add(1)
	fps := s.FPS
	if fps <= 0 {
		fps = 30
	}
	ctx, cancel := context.WithCancel(ctx)
	return &pictures{s: s, ctx: ctx, cancel: cancel, tick: time.NewTicker(time.Second / time.Duration(fps))}, nil
}

type pictures struct {
	s      *Source
	ctx    context.Context
	cancel context.CancelFunc
	tick   *time.Ticker
	n      int
	once   sync.Once
}

func (p *pictures) Next() (h264.Frame, error) {
	select {
	case <-p.ctx.Done():
		return h264.Frame{}, p.ctx.Err()
	case <-p.tick.C:
	}
	p.s.mu.Lock()
	w, h, online := p.s.w, p.s.h, p.s.online
	p.s.mu.Unlock()
	p.n++
	return h264.Frame{Format: h264.JPEG, Width: w, Height: h, Data: p.s.Picture(w, h, p.n), Time: time.Now(), Online: online}, nil
}

func (p *pictures) Close() error {
	p.once.Do(func() {
		p.cancel()
		p.tick.Stop()
		p.s.open.Add(-1)
	})
	return nil
}

// Counting wraps an Opener and counts its encoders: opened, open now,
// the most open at once, and the settings each was opened with.
type Counting struct {
	h264.Opener

	mu            sync.Mutex
	opened        int
	running, most int
	settings      []h264.Settings
	encoders      []h264.Encoder
}

// Open opens an encoder of the wrapped Opener.
func (c *Counting) Open(ctx context.Context, s h264.Settings) (h264.Encoder, error) {
	e, err := c.Opener.Open(ctx, s)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.opened++
	c.running++
	c.most = max(c.most, c.running)
	c.settings = append(c.settings, s)
	c.encoders = append(c.encoders, e)
	c.mu.Unlock()
	return &counted{Encoder: e, c: c}, nil
}

// Counts returns the encoders opened, open now, and the most at once.
func (c *Counting) Counts() (opened, running, most int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.running, c.most
}

// Settings are those of each encoder opened, in order.
func (c *Counting) Settings() []h264.Settings {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]h264.Settings(nil), c.settings...)
}

// Last is the last encoder opened (the wrapped Opener's own), nil before
// one.
func (c *Counting) Last() h264.Encoder {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.encoders) == 0 {
		return nil
	}
	return c.encoders[len(c.encoders)-1]
}

// Pids are the process ids of the encoders opened that are processes.
func (c *Counting) Pids() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	for _, e := range c.encoders {
		if p, ok := e.(interface{ Pid() int }); ok {
			pids = append(pids, p.Pid())
		}
	}
	return pids
}

type counted struct {
	h264.Encoder
	c    *Counting
	once sync.Once
}

func (e *counted) Close() error {
	err := e.Encoder.Close()
	e.once.Do(func() {
		e.c.mu.Lock()
		e.c.running--
		e.c.mu.Unlock()
	})
	return err
}

// Decode decodes an H.264 stream (Annex B) with ffmpeg into its pictures,
// whose size its first SPS gives.
func Decode(ffmpegPath string, stream []byte) ([]*image.RGBA, error) {
	raw, w, h, err := DecodeRaw(ffmpegPath, stream, "rgba", 4)
	if err != nil {
		return nil, err
	}
	var pics []*image.RGBA
	for _, b := range raw {
		pics = append(pics, &image.RGBA{Pix: b, Stride: 4 * w, Rect: image.Rect(0, 0, w, h)})
	}
	return pics, nil
}

// DecodeRaw decodes an H.264 stream (Annex B) with ffmpeg into its
// pictures in ffmpeg's pixel format pixFmt of bpp bytes a pixel (rgba 4,
// gray 1), tight, of the size its first SPS gives (returned).
func DecodeRaw(ffmpegPath string, stream []byte, pixFmt string, bpp int) (pics [][]byte, w, h int, err error) {
	var sps h264.SPS
	found := false
	for _, n := range h264.SplitNALs(stream) {
		if h264.NALType(n) == h264.NALSPS {
			if sps, err = h264.ParseSPS(n); err != nil {
				return nil, 0, 0, err
			}
			found = true
			break
		}
	}
	if !found {
		return nil, 0, 0, fmt.Errorf("h264test: no SPS in %d bytes", len(stream))
	}
	cmd := exec.Command(ffmpegPath, "-hide_banner", "-loglevel", "error", "-f", "h264", "-i", "pipe:0",
		"-f", "rawvideo", "-pix_fmt", pixFmt, "pipe:1")
	cmd.Stdin = bytes.NewReader(stream)
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("h264test: ffmpeg: %w: %s", err, errBuf.String())
	}
	size := sps.Width * sps.Height * bpp
	for len(out) >= size {
		pics = append(pics, out[:size:size])
		out = out[size:]
	}
	return pics, sps.Width, sps.Height, nil
}
