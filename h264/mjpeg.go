package h264

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/textproto"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Source gives the pictures to encode.
type Source interface {
	// Open starts a stream of pictures, which ends with ctx or Close.
	Open(ctx context.Context) (Pictures, error)
}

// Pictures is a stream of pictures.
type Pictures interface {
	// Next blocks for the next picture; its Data is the caller's.
	Next() (Frame, error)
	Close() error
}

// MJPEGSource reads the pictures of ustreamer's MJPEG stream, asked for
// with extra_headers=1 (package streamer's Stream): each part has its
// Content-Length, and X-UStreamer-Online, -Width, -Height and
// -Grab-Time headers (src/ustreamer/http/server.c in pikvm/ustreamer).
type MJPEGSource struct {
	// Stream opens the stream: the body of ustreamer's /stream answer.
	// Closing it ends the stream and lets the streamer go.
	Stream func(ctx context.Context) (io.ReadCloser, error)
}

// Open opens the stream.
func (s MJPEGSource) Open(ctx context.Context) (Pictures, error) {
	rc, err := s.Stream(ctx)
	if err != nil {
		return nil, err
	}
	return NewMJPEGReader(rc), nil
}

// maxJPEG bounds a picture of the stream.
const maxJPEG = 16 << 20

// ErrMJPEG is a stream that is not ustreamer's MJPEG.
var ErrMJPEG = errors.New("h264: malformed MJPEG stream")

// MJPEGReader reads the parts of a multipart MJPEG stream.
type MJPEGReader struct {
	rc io.ReadCloser
	r  *textproto.Reader
	br *bufio.Reader
}

// NewMJPEGReader reads the MJPEG stream rc, which Close closes.
func NewMJPEGReader(rc io.ReadCloser) *MJPEGReader {
	br := bufio.NewReaderSize(rc, 64<<10)
	return &MJPEGReader{rc: rc, br: br, r: textproto.NewReader(br)}
}

// Next reads the next part: its headers up to the blank line (boundary
// lines and the blank lines between parts are skipped), then
// Content-Length bytes of JPEG.
func (m *MJPEGReader) Next() (Frame, error) {
	hdr := textproto.MIMEHeader{}
	for lines := 0; ; lines++ {
		if lines > 64 {
			return Frame{}, fmt.Errorf("%w: no picture after 64 lines", ErrMJPEG)
		}
		line, err := m.r.ReadLine()
		if err != nil {
			return Frame{}, err
		}
		if line == "" {
			if len(hdr) > 0 {
				break
			}
			continue
		}
		if strings.HasPrefix(line, "--") {
			continue // a boundary
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return Frame{}, fmt.Errorf("%w: a header line without a colon", ErrMJPEG)
		}
		hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	n, err := strconv.Atoi(hdr.Get("Content-Length"))
	if err != nil || n <= 0 || n > maxJPEG {
		return Frame{}, fmt.Errorf("%w: Content-Length %q", ErrMJPEG, hdr.Get("Content-Length"))
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(m.br, data); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	f := Frame{Format: JPEG, Data: data, Online: hdr.Get("X-UStreamer-Online") != "false", Time: partTime(hdr)}
	f.Width, _ = strconv.Atoi(hdr.Get("X-UStreamer-Width"))
	f.Height, _ = strconv.Atoi(hdr.Get("X-UStreamer-Height"))
	if f.Width <= 0 || f.Height <= 0 {
		if f.Width, f.Height, err = JPEGSize(data); err != nil {
			return Frame{}, err
		}
	}
	return f, nil
}

// Close ends the stream.
func (m *MJPEGReader) Close() error { return m.rc.Close() }

// partTime is when a part's picture was captured: ustreamer's
// X-UStreamer-Grab-Time, seconds of CLOCK_MONOTONIC, turned into the wall
// clock's time through this process's own reading of both clocks; else
// its X-Timestamp (the wall clock when it was sent); else now.
func partTime(h textproto.MIMEHeader) time.Time {
	now := time.Now()
	if g, err := strconv.ParseFloat(h.Get("X-UStreamer-Grab-Time"), 64); err == nil && g > 0 {
		var ts unix.Timespec
		if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
			mono := float64(ts.Sec) + float64(ts.Nsec)/1e9
			if age := mono - g; age >= 0 && age < 60 {
				return now.Add(-time.Duration(age * 1e9))
			}
		}
	}
	if x, err := strconv.ParseFloat(h.Get("X-Timestamp"), 64); err == nil && x > 0 && !math.IsInf(x, 0) {
		sec, frac := math.Modf(x)
		if t := time.Unix(int64(sec), int64(frac*1e9)); now.Sub(t).Abs() < time.Minute {
			return t
		}
	}
	return now
}

// ErrJPEG is a picture whose size cannot be read.
var ErrJPEG = errors.New("h264: no JPEG frame header")

// JPEGSize reads a JPEG's width and height from its frame header (SOF0
// to SOF15 but DHT, JPG and DAC: ITU-T T.81 table B.1).
func JPEGSize(b []byte) (width, height int, err error) {
	if !bytes.HasPrefix(b, []byte{0xff, 0xd8}) {
		return 0, 0, ErrJPEG
	}
	i := 2
	for i+4 <= len(b) {
		if b[i] != 0xff {
			return 0, 0, ErrJPEG
		}
		marker := b[i+1]
		if marker == 0xff { // fill byte
			i++
			continue
		}
		if marker == 0xd8 || marker >= 0xd0 && marker <= 0xd7 || marker == 0x01 {
			i += 2
			continue
		}
		l := int(b[i+2])<<8 | int(b[i+3])
		if l < 2 || i+2+l > len(b) {
			return 0, 0, ErrJPEG
		}
		if marker >= 0xc0 && marker <= 0xcf && marker != 0xc4 && marker != 0xc8 && marker != 0xcc {
			if l < 7 {
				return 0, 0, ErrJPEG
			}
			h := int(b[i+5])<<8 | int(b[i+6])
			w := int(b[i+7])<<8 | int(b[i+8])
			if w == 0 || h == 0 {
				return 0, 0, ErrJPEG
			}
			return w, h, nil
		}
		if marker == 0xda || marker == 0xd9 { // scan or end before a frame header
			return 0, 0, ErrJPEG
		}
		i += 2 + l
	}
	return 0, 0, ErrJPEG
}
