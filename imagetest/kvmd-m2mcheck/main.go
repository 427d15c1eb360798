// Command kvmd-m2mcheck drives the hardware encoder path in the booted
// test's guest (built for arm64 by the test, copied in through the shared
// directory): raw frames from ustreamer's raw sink, coded by the kernel's
// vicodec through package v4l2m2m, as the daemon's H.264 path does with a
// Pi's bcm2835-codec.
//
//	kvmd-m2mcheck encode -sink NAME -out DIR -frames N [-force K] [-switch CMD]
//	kvmd-m2mcheck png -in FILE -width W -height H
//
// encode reads frames from the raw sink NAME (ustreamer's --raw-sink),
// finds the machine's stateful FWHT encoder (v4l2m2m.Detect) and codes N
// frames of the capture, asking for a key frame before frame K; with
// -switch it then runs CMD (sh -c: a new resolution of the source) and
// codes N frames of the new size. The frames of each size go to a file in
// DIR (seg1.fwht, seg2.fwht). It prints one JSON object: the encoder, its
// controls and resets, the sink's frames, and for each size its frames'
// key flags and the time each took to code.
//
// png reads the last frame of FILE, raw planar YUV 4:2:2 (V4L2 422P,
// what vicodec's decoder gives for a stream coded from YUYV) of W x H,
// and prints it as a base64 PNG.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"kvmd/hw"
	"kvmd/hw/v4l2m2m"
	"kvmd/streamer/memsink"
)

type segment struct {
	Width   int       `json:"width"`
	Height  int       `json:"height"`
	File    string    `json:"file"`
	Keys    []bool    `json:"keys"`
	Bytes   []int     `json:"bytes"`
	CodeMS  []float64 `json:"code_ms"`
	Formats []string  `json:"formats"`
}

type report struct {
	Device   v4l2m2m.Device   `json:"device"`
	Controls v4l2m2m.Controls `json:"controls"`
	Resets   int              `json:"resets"`
	Sink     struct {
		Frames  int `json:"frames"`
		Offline int `json:"offline"`
	} `json:"sink"`
	Segments []*segment `json:"segments"`
	Took     string     `json:"took"`
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kvmd-m2mcheck encode|png ...")
		os.Exit(2)
	}
	fl := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	sink := fl.String("sink", "", "ustreamer's raw sink")
	out := fl.String("out", "", "where the coded frames go")
	frames := fl.Int("frames", 8, "frames of each size")
	force := fl.Int("force", -1, "ask for a key frame before this frame (0 the first)")
	sw := fl.String("switch", "", "a command that changes the source's size, run after the first frames")
	in := fl.String("in", "", "raw 422P frames")
	w := fl.Int("width", 0, "their width")
	h := fl.Int("height", 0, "their height")
	fl.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "encode":
		err = encode(*sink, *out, *frames, *force, *sw)
	case "png":
		err = toPNG(*in, *w, *h)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvmd-m2mcheck:", err)
		os.Exit(1)
	}
}

func encode(sinkName, dir string, n, force int, switchCmd string) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var r *memsink.Reader
	for {
		var err error
		if r, err = memsink.Open(sinkName, memsink.Options{}); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || time.Since(start) > time.Minute {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer r.Close()
	dev, ok, err := v4l2m2m.Detect(hw.New("/"), v4l2m2m.FWHT)
	if err != nil || !ok {
		return fmt.Errorf("no FWHT encoder: %v", err)
	}
	// GOP 0: as few key frames as the driver allows (vicodec: 16), so
	// that those seen are the first, the forced one and the new size's.
	e, err := v4l2m2m.Open(v4l2m2m.Config{Device: dev.Path, Coded: v4l2m2m.FWHT, GOP: 0, Timeout: time.Minute})
	if err != nil {
		return err
	}
	defer e.Close()
	rep := report{Device: e.Device(), Controls: e.Controls()}
	var seg *segment
	var file *os.File
	var buf []byte
	switched := false
	total := 0
	for {
		f, err := r.Next(ctx, buf)
		if err != nil {
			return err
		}
		buf = f.Data
		rep.Sink.Frames++
		if !f.Online {
			rep.Sink.Offline++
			continue
		}
		if seg == nil || f.Width != seg.Width || f.Height != seg.Height {
			if seg != nil && !switched {
				return fmt.Errorf("the source went from %dx%d to %dx%d unasked", seg.Width, seg.Height, f.Width, f.Height)
			}
			if seg != nil && len(rep.Segments) == 2 {
				continue // the first size's last frames, after the second's
			}
			seg = &segment{Width: f.Width, Height: f.Height, File: fmt.Sprintf("seg%d.fwht", len(rep.Segments)+1)}
			rep.Segments = append(rep.Segments, seg)
			if file != nil {
				file.Close()
			}
			if file, err = os.Create(filepath.Join(dir, seg.File)); err != nil {
				return err
			}
			defer file.Close()
		}
		if len(seg.Keys) == n {
			continue // the first size's frames still coming after the switch
		}
		if total == force {
			e.ForceKeyFrame()
		}
		t0 := time.Now()
		u, err := e.Encode(ctx, v4l2m2m.Frame{Format: v4l2m2m.PixelFormat(f.Format), Width: f.Width, Height: f.Height,
			Stride: f.Stride, Data: f.Data, Time: f.Grab})
		if err != nil {
			return fmt.Errorf("frame %d (%dx%d %s): %w", total, f.Width, f.Height, f.FourCC(), err)
		}
		seg.CodeMS = append(seg.CodeMS, float64(time.Since(t0).Microseconds())/1000)
		seg.Keys = append(seg.Keys, u.Key)
		seg.Bytes = append(seg.Bytes, len(u.Data))
		if !slices.Contains(seg.Formats, f.FourCC()) {
			seg.Formats = append(seg.Formats, f.FourCC())
		}
		if _, err := file.Write(u.Data); err != nil {
			return err
		}
		total++
		if len(seg.Keys) < n {
			continue
		}
		if switched || switchCmd == "" {
			break
		}
		if out, err := exec.Command("sh", "-c", switchCmd).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", switchCmd, err, out)
		}
		switched = true
	}
	rep.Resets = e.Resets()
	if err := e.Close(); err != nil {
		return err
	}
	rep.Took = time.Since(start).Round(time.Millisecond).String()
	return json.NewEncoder(os.Stdout).Encode(rep)
}

// toPNG prints the last w x h 422P frame of file as a base64 PNG.
func toPNG(file string, w, h int) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	size := w * h * 2
	if w <= 0 || h <= 0 || len(b) < size || len(b)%size != 0 {
		return fmt.Errorf("%s: %d bytes is no whole number of %dx%d 422P frames", file, len(b), w, h)
	}
	last := b[len(b)-size:]
	img := &image.YCbCr{
		Y: last[:w*h], Cb: last[w*h : w*h+w*h/2], Cr: last[w*h+w*h/2:],
		YStride: w, CStride: w / 2, SubsampleRatio: image.YCbCrSubsampleRatio422,
		Rect: image.Rect(0, 0, w, h),
	}
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		return err
	}
	fmt.Println(base64.StdEncoding.EncodeToString(out.Bytes()))
	return nil
}
