package imagetest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// vicodecBuild is vicodec.sh building the kernel's vicodec for the
// image's kernel, in the background while the machine boots (the first
// time: Debian's kernel source and headers downloaded, about a minute;
// then cached beside the image).
type vicodecBuild struct {
	done chan struct{}
	ko   string
	err  error
	log  string
}

func buildVicodec(img image) *vicodecBuild {
	b := &vicodecBuild{done: make(chan struct{})}
	go func() {
		defer close(b.done)
		cmd := exec.Command("sh", "vicodec.sh", img.dir)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		b.ko, b.err, b.log = strings.TrimSpace(string(out)), err, stderr.String()
	}()
	return b
}

func (b *vicodecBuild) wait(t *testing.T) string {
	t.Helper()
	<-b.done
	if b.err != nil {
		t.Fatalf("vicodec.sh: %v\n%s", b.err, tail(b.log, 3000))
	}
	return b.ko
}

// m2mReport is what kvmd-m2mcheck encode prints.
type m2mReport struct {
	Device struct {
		Path   string `json:"path"`
		Driver string `json:"driver"`
		MPlane bool   `json:"mplane"`
	} `json:"device"`
	Controls map[string]bool `json:"controls"`
	Resets   int             `json:"resets"`
	Sink     struct {
		Frames  int `json:"frames"`
		Offline int `json:"offline"`
	} `json:"sink"`
	// The sizes coded (JSON's names match the fields' whatever their
	// case).
	Segments []struct {
		Width, Height int
		File          string
		Keys          []bool
		Formats       []string
	}
	Took string `json:"took"`
}

// testM2M proves the hardware H.264 path's V4L2 code (package
// hw/v4l2m2m) on a real kernel driver. A Pi's encoder is bcm2835-codec,
// which no machine here has; the kernel's vicodec is a stateful encoder
// with the same interface (its codec FWHT). Debian's kernel does not ship
// it, nor vim2m (modinfo says so, logged here), so the test loads the one
// vicodec.sh built from Debian's kernel source for this kernel. Then: the
// package's own tests in this system (detection, the controls vicodec has
// and lacks, key frames by GOP and asked for, a GOP changed while
// streaming, a new size and a new raw format mid-stream, Close while
// coding, nothing left mapped), with vicodec single-planar and then
// multi-planar (bcm2835-codec's API); the daemon's hardware encoder
// (package h264/m2m) in its H.264 pipeline on multi-planar vicodec (units
// from a key one on, P-frames, a key frame asked for, a new encoder at a
// new size, the device closed after the last subscriber, then vivid's
// frames from ustreamer's raw sink through h264.SinkSource); and end to
// end: Debian's ustreamer
// on vivid with its raw sink (package streamer/memsink), its YUYV frames
// coded by vicodec, a key frame asked for, vivid switched from 640x480 to
// 1280x720 mid-stream; on the far side vicodec's stateful decoder, driven
// by v4l2-ctl, decodes each size's stream and the two as one (across the
// decoder's own source change), and the last picture of each size shows
// vivid's colour bars (webcheck bars, the console test's check).
func (s *system) testM2M(t *testing.T) {
	sh := s.m.shell
	for _, mod := range []string{"vicodec", "vim2m"} {
		out, st := sh.run(t, "modinfo "+mod)
		t.Logf("Debian's kernel: modinfo %s: exit status %d: %s", mod, st, out)
	}
	const ko = "/usr/local/lib/kvmd-imagetest/vicodec.ko"
	shipped := false
	if _, st := sh.run(t, "modinfo vicodec"); st == 0 {
		shipped = true // a later Debian kernel that has it: that one
	} else {
		s.installShared(t, s.vicodec.wait(t), ko)
	}
	load := func(params string) {
		t.Helper()
		sh.run(t, "rmmod vicodec")
		cmd := "modprobe -a v4l2-mem2mem videobuf2-vmalloc && insmod " + ko + " " + params
		if shipped {
			cmd = "modprobe vicodec " + params
		}
		sh.must(t, cmd)
		names := sh.must(t, "cat /sys/class/video4linux/video*/name")
		for _, n := range []string{"stateful-encoder", "stateful-decoder"} {
			if !strings.Contains(names, n) {
				t.Fatalf("vicodec loaded (%s), but no %s among the video devices:\n%s", params, n, names)
			}
		}
	}
	defer sh.run(t, "rmmod vicodec")

	// The package's tests, single- and multi-planar.
	s.installTests(t, "hw/v4l2m2m", "kvmd-v4l2m2m.test")
	s.installTests(t, "h264/m2m", "kvmd-h264-m2m.test")
	for _, params := range []string{"", "multiplanar=1"} {
		load(params)
		out, st, err := sh.runTimeout("KVMD_VICODEC=1 kvmd-v4l2m2m.test -test.v -test.run Vicodec", 5*time.Minute)
		if err != nil || st != 0 || strings.Count(out, "--- PASS: TestVicodec") != 3 {
			t.Fatalf("hw/v4l2m2m's tests on vicodec %s: exit status %d, %v:\n%s", params, st, err, out)
		}
		t.Logf("hw/v4l2m2m's tests on vicodec %s:\n%s", params, out)
	}

	// End to end. The daemon's ustreamer must have let vivid go: a
	// client of a subtest before may have left less than the shutdown
	// delay ago.
	s.installGuestTool(t, "kvmd-m2mcheck")
	if !waitFor(t.Context(), 20*time.Second, 250*time.Millisecond, func() bool { return len(s.ustreamers(t)) == 0 }) {
		t.Fatalf("the daemon's ustreamer still runs: %v", s.ustreamers(t))
	}
	sh.must(t, "v4l2-ctl -d /dev/video0 -c dv_timings=0 -c dv_timings_signal_mode=4")
	defer sh.run(t, "v4l2-ctl -d /dev/video0 -c dv_timings=9 -c dv_timings_signal_mode=0")
	const dir = "/run/kvmd-m2m"
	sh.must(t, "rm -rf "+dir+" && mkdir "+dir)
	sh.must(t, "setsid nohup ustreamer --device=/dev/video0 --dv-timings --format=YUYV"+
		" --encoder=CPU --persistent --raw-sink=kvmd-m2m --raw-sink-rm --unix="+dir+"/ustreamer.sock --unix-rm"+
		" --no-log-colors >"+dir+"/ustreamer.log 2>&1 & echo $! >"+dir+"/ustreamer.pid")
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			sh.run(t, "kill $(cat "+dir+"/ustreamer.pid)")
		}
	}
	defer stop()
	// The daemon's hardware encoder (package h264/m2m) in its pipeline,
	// on vicodec: generated pictures, then ustreamer's raw frames of
	// vivid through h264.SinkSource.
	out, st, err := sh.runTimeout("KVMD_VICODEC=1 KVMD_RAW_SINK=kvmd-m2m kvmd-h264-m2m.test -test.v -test.run Vicodec", 5*time.Minute)
	if err != nil || st != 0 || strings.Count(out, "--- PASS: TestVicodec") != 2 {
		t.Fatalf("h264/m2m's tests on vicodec: exit status %d, %v:\n%s", st, err, out)
	}
	t.Logf("h264/m2m's tests on vicodec:\n%s", out)
	const frames, force = 6, 3
	out, st, err = sh.runTimeout(fmt.Sprintf("kvmd-m2mcheck encode -sink kvmd-m2m -out %s -frames %d -force %d"+
		" -switch 'v4l2-ctl -d /dev/video0 -c dv_timings=9'", dir, frames, force), 5*time.Minute)
	if err != nil || st != 0 {
		log, _ := sh.run(t, "tail -30 "+dir+"/ustreamer.log")
		t.Fatalf("kvmd-m2mcheck encode: exit status %d, %v:\n%s\nustreamer:\n%s", st, err, out, log)
	}
	stop()
	var rep m2mReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("kvmd-m2mcheck encode: %v\n%s", err, out)
	}
	t.Logf("kvmd-m2mcheck encode: %s", out)
	if rep.Device.Driver != "vicodec" || !rep.Device.MPlane || rep.Controls["gop"] != true || rep.Controls["force_key"] {
		t.Errorf("encoder %+v, controls %v: want vicodec multi-planar, its GOP control and no key frame control", rep.Device, rep.Controls)
	}
	if len(rep.Segments) != 2 {
		t.Fatalf("%d sizes coded, want 640x480 then 1280x720", len(rep.Segments))
	}
	want := [][2]int{{640, 480}, {1280, 720}}
	for i, seg := range rep.Segments {
		if [2]int{seg.Width, seg.Height} != want[i] || len(seg.Keys) != frames || !slices.Equal(seg.Formats, []string{"YUYV"}) {
			t.Errorf("size %d: %dx%d, %d frames of %v: want %v, %d YUYV frames", i+1, seg.Width, seg.Height, len(seg.Keys), seg.Formats, want[i], frames)
		}
		if len(seg.Keys) > 0 && !seg.Keys[0] {
			t.Errorf("the first %dx%d frame is not a key frame: %v", seg.Width, seg.Height, seg.Keys)
		}
	}
	// The key frame asked for, at frame 3 of the first size: vicodec
	// has no control for it, so a reset of the stream made it.
	if k := rep.Segments[0].Keys; len(k) > force && !k[force] || rep.Resets != 1 {
		t.Errorf("key frames %v with %d resets: want one at %d, made by one reset", k, rep.Resets, force)
	}

	// The far side: vicodec's stateful decoder, through v4l2-ctl.
	dec := strings.TrimSpace(sh.must(t, `for d in /sys/class/video4linux/video*; do [ "$(cat $d/name)" != stateful-decoder ] || echo /dev/${d##*/}; done`))
	if !strings.HasPrefix(dec, "/dev/video") {
		t.Fatalf("vicodec's stateful decoder: %q", dec)
	}
	decode := func(in, outFile string) int {
		t.Helper()
		sh.must(t, fmt.Sprintf("v4l2-ctl -d %s --stream-mmap --stream-out-mmap --stream-from=%s/%s --stream-to=%s/%s",
			dec, dir, in, dir, outFile))
		var n int
		fmt.Sscan(sh.must(t, "stat -c %s "+dir+"/"+outFile), &n)
		return n
	}
	total := 0
	for _, seg := range rep.Segments {
		raw := strings.TrimSuffix(seg.File, ".fwht") + ".raw"
		// 4:2:2 planar, as the stream from YUYV says.
		frame := seg.Width * seg.Height * 2
		if n := decode(seg.File, raw); n != len(seg.Keys)*frame {
			t.Errorf("%s decoded to %d bytes, want %d frames of %dx%d 4:2:2", seg.File, n, len(seg.Keys), seg.Width, seg.Height)
			continue
		}
		total += len(seg.Keys) * frame
		b64 := sh.must(t, fmt.Sprintf("kvmd-m2mcheck png -in %s/%s -width %d -height %d", dir, raw, seg.Width, seg.Height))
		png, err := base64.StdEncoding.DecodeString(strings.TrimSpace(b64))
		if err != nil {
			t.Fatal(err)
		}
		shot := s.shotPath(fmt.Sprintf("m2m-%dx%d.png", seg.Width, seg.Height))
		if err := os.WriteFile(shot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		res := s.webcheck(t, "bars", "-in", shot)
		t.Logf("the last %dx%d frame decoded on the far side: bars %v", seg.Width, seg.Height, res["bars"])
	}
	sh.must(t, fmt.Sprintf("cat %s/%s %s/%s >%s/all.fwht", dir, rep.Segments[0].File, dir, rep.Segments[1].File, dir))
	if n := decode("all.fwht", "all.raw"); n != total {
		t.Errorf("the two sizes as one stream decoded to %d bytes, want %d", n, total)
	}
}

// installTests builds the tests of package pkg (a path below the
// repository) for the guest and installs the binary as /usr/local/bin/name.
func (s *system) installTests(t *testing.T, pkg, name string) {
	t.Helper()
	test := filepath.Join(s.share, name)
	build := exec.Command("go", "test", "-c", "-o", test, "../"+pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s's tests: %v\n%s", pkg, err, out)
	}
	s.installShared(t, test, "/usr/local/bin/"+name)
}

// installShared copies a host file into the guest at dest, through the
// shared directory.
func (s *system) installShared(t *testing.T, host, dest string) {
	t.Helper()
	name := filepath.Base(host)
	if filepath.Dir(host) != s.share {
		b, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(s.share, name), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s.m.shell.must(t, "mkdir -p /run/kvmd-imagetest "+filepath.Dir(dest)+
		" && mount -t 9p -o trans=virtio,version=9p2000.L,ro kvmd /run/kvmd-imagetest && "+
		"install -m 0755 /run/kvmd-imagetest/"+name+" "+dest+"; st=$?; umount /run/kvmd-imagetest; exit $st")
}
