package h264

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	"kvmd/streamer/memsink"
)

// SinkSource reads the raw pictures of ustreamer's raw sink (its
// --raw-sink, package streamer/memsink): the pictures as the capture
// gave them, for the board's encoder, which takes no JPEG.
type SinkSource struct {
	// Name is the sink's (ustreamer's --raw-sink NAME).
	Name string
	// Hold starts the streamer if need be and keeps it running until
	// release is called; its error says why it cannot run.
	Hold func(ctx context.Context) (release func(), err error)
	// Options tune the sink's reader (the defaults when zero).
	Options memsink.Options
	// Wait bounds the wait for ustreamer to make the sink once it runs:
	// 10 s when 0.
	Wait time.Duration
}

// sinkFormats are the V4L2 formats of the sink's pictures package h264
// has, by their four characters.
var sinkFormats = map[string]Format{"YUYV": YUYV, "UYVY": UYVY, "NV12": NV12, "YU12": I420}

// Open holds the streamer and opens its sink.
func (s SinkSource) Open(ctx context.Context) (Pictures, error) {
	release, err := s.Hold(ctx)
	if err != nil {
		return nil, err
	}
	wait := s.Wait
	if wait <= 0 {
		wait = 10 * time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		r, err := memsink.Open(s.Name, s.Options)
		if err == nil {
			ctx, cancel := context.WithCancel(ctx)
			return &sinkPictures{r: r, ctx: ctx, cancel: cancel, release: release}, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Now().After(deadline) {
			release()
			if errors.Is(err, memsink.ErrUnsupported) || errors.Is(err, memsink.ErrVersion) {
				err = Unavailable("", err)
			}
			return nil, fmt.Errorf("the streamer's raw sink %s: %w", s.Name, err)
		}
		select {
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

type sinkPictures struct {
	r       *memsink.Reader
	ctx     context.Context
	cancel  context.CancelFunc
	release func()
}

// Next waits for the sink's next picture. ustreamer's placeholder (a
// JPEG, while there is no signal or no device) is skipped: the board's
// encoder takes raw pictures only, and the clients keep the last one. A
// capture in a raw format package h264 has not is an error wrapping
// ErrUnavailable.
func (p *sinkPictures) Next() (Frame, error) {
	for {
		f, err := p.r.Next(p.ctx, nil)
		if err != nil {
			return Frame{}, err
		}
		if !f.Online {
			continue
		}
		format, ok := sinkFormats[f.FourCC()]
		if !ok {
			return Frame{}, Unavailable(fmt.Sprintf("the capture's pictures are %s, which the board's encoder is not given here", f.FourCC()), nil)
		}
		t := f.Grab
		if t.IsZero() {
			t = time.Now()
		}
		return Frame{Format: format, Width: f.Width, Height: f.Height, Stride: f.Stride, Data: f.Data, Time: t, Online: true}, nil
	}
}

// Close closes the sink and lets the streamer go.
func (p *sinkPictures) Close() error {
	p.cancel()
	err := p.r.Close()
	p.release()
	return err
}
