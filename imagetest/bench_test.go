package imagetest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"kvmd/internal/benchmd"
)

// benchSection names the section of BENCHMARKS.md that the image test
// writes; make bench (tools/cmd/kvmbench) keeps it when it rewrites the file.
const benchSection = "imagetest"

// figures are the measurements for BENCHMARKS.md.
type figures struct {
	image, install, bootToAnswer, rebootToAnswer, watchdogRestart time.Duration
	imageBuilt                                                    bool
	guestStartup                                                  string // systemd-analyze time
	guestKernel                                                   string
	qemu                                                          string
	daemonStart                                                   time.Duration
	rssIdle, rssAfter                                             int // KiB
	streamer                                                      streamerFigures
	h264                                                          h264Figures
	// signalToEvent: vivid's signal switched by v4l2-ctl to the streamer
	// event at an /api/ws client (testVideo).
	signalToEvent []time.Duration
	// The keyboard (testHID): an /api/ws key message to its EV_KEY at the
	// guest's input layer, µs; print's typing rate, characters a second.
	hidLatencyMedian, hidLatencyP99 int
	hidRate, hidSlowRate            float64
	hidTest                         time.Duration
	// msdUploadMiBps is an image's upload through the daemon (HTTPS, the
	// forwarded port); msdHostReadMBps the host side reading the LUN with
	// dd (direct I/O), in dd's MB/s.
	msdUploadMiBps, msdHostReadMBps float64
}

// durationMedian returns the median of ds and their maximum; zero for none.
func durationMedian(ds []time.Duration) (time.Duration, time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}

func (f *figures) report(t *testing.T) {
	t.Logf("imagetest: image_s=%.0f built=%v install_s=%.0f boot_to_answer_s=%.1f reboot_to_answer_s=%.1f daemon_start_ms=%d watchdog_restart_s=%.0f rss_idle_kib=%d rss_after_kib=%d guest_startup=%q",
		f.image.Seconds(), f.imageBuilt, f.install.Seconds(), f.bootToAnswer.Seconds(), f.rebootToAnswer.Seconds(),
		f.daemonStart.Milliseconds(), f.watchdogRestart.Seconds(), f.rssIdle, f.rssAfter, f.guestStartup)
	t.Logf("imagetest: hid_ws_to_evkey_median_us=%d p99_us=%d print_chars_per_s=%.0f print_slow_chars_per_s=%.1f hid_test_s=%.0f",
		f.hidLatencyMedian, f.hidLatencyP99, f.hidRate, f.hidSlowRate, f.hidTest.Seconds())
	t.Logf("imagetest: h264_first_ms=%.0f h264_fps=%.1f h264_bytes=%d webrtc_first_ms=%.0f webrtc_fps=%.1f h264_resize_ms=%.0f",
		f.h264.firstMS, f.h264.fps, f.h264.bytes, f.h264.webrtcMS, f.h264.webrtcFPS, f.h264.resizeMS)
	path := os.Getenv("KVMD_IMAGETEST_BENCH")
	if path == "" || t.Failed() {
		return
	}
	// Relative to the checkout, as make image-test is run from there (go
	// test runs in this directory).
	if !filepath.IsAbs(path) {
		path = filepath.Join("..", path)
	}
	if err := benchmd.WriteSection(path, benchSection, f.markdown(time.Now())); err != nil {
		t.Errorf("writing %s: %v", path, err)
		return
	}
	t.Logf("wrote the booted-system section of %s", path)
}

// fmtList formats each of v with format, comma-separated.
func fmtList(v []float64, format string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(format, x)
	}
	return strings.Join(parts, ", ")
}

func mib(kib int) string { return fmt.Sprintf("%.1f MiB", float64(kib)/1024) }

// markdown is the BENCHMARKS.md section, markers included.
func (f *figures) markdown(now time.Time) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	host, _ := os.Hostname()
	w("%s", benchmd.Begin(benchSection))
	w("## Booted arm64 system (qemu-system-aarch64)")
	w("")
	w("Produced by the booted-system test, `KVMD_IMAGETEST_BENCH=BENCHMARKS.md make image-test`")
	w("(imagetest/; `make bench` keeps this section as it is). The Debian package of the checkout,")
	w("installed with `apt install ./kvmd_*.deb` into Debian 12 arm64 (kernel %s), booted under", f.guestKernel)
	w("systemd in %s, `-M virt -cpu %s -smp 2 -m 1024`, **emulated by TCG** on", f.qemu, qemuCPU)
	w("this %d-CPU %s host (%s, %s UTC), with the other work of the machine. The times are the", runtime.NumCPU(), runtime.GOARCH, host, now.UTC().Format("2006-01-02 15:04"))
	w("emulator's, several times what a Raspberry Pi takes; the RSS is the daemon's own (VmRSS of its")
	w("main process in the guest's `/proc/PID/status`), as on a device.")
	w("")
	w("| measure | value |")
	w("|---|---:|")
	w("| power-on (qemu started) to kvmd answering HTTPS on the forwarded port (the first request starts it through kvmd.socket) | %.1f s |", f.bootToAnswer.Seconds())
	w("| a power cut (`sysrq b`, right after an upload) to kvmd answering again | %.1f s |", f.rebootToAnswer.Seconds())
	w("| the guest's `systemd-analyze time` | %s |", f.guestStartup)
	w("| kvmd's start, exec to `READY=1` (systemd's timestamps) | %d ms |", f.daemonStart.Milliseconds())
	w("| kvmd VmRSS, idle after the first boot | %s |", mib(f.rssIdle))
	w("| kvmd VmRSS after the `/api/info` and `/api/log` checks (follow included) | %s |", mib(f.rssAfter))
	w("| watchdog: `SIGSTOP` to the daemon restarted and running (`WatchdogSec=30s`) | %.0f s |", f.watchdogRestart.Seconds())
	if sf := f.streamer; len(sf.ratios) > 0 {
		w("| streamer: frames a second a client gets from ustreamer's own socket (vivid %dx%d, YUYV, ustreamer 4.9's CPU encoder taking all the emulated CPU there is), median of %d rounds | %.1f |", sf.width, sf.height, len(sf.direct), median(sf.direct))
		w("| streamer: frames a second a second client gets through the daemon (`/streamer/stream`, its unix socket) at the same time, median | %.1f |", median(sf.daemon))
		w("| streamer: through the daemon / ustreamer's own socket, median of the rounds (%s) | %.3fx |", fmtList(sf.ratios, "%.3f"), median(sf.ratios))
		// Under TCG the daemon's own periodic work (idle, no streamer:
		// 40-80 % of a core in these runs) varies from one 5 s window to
		// the next by more than the relay costs: the difference a frame
		// is shown with its rounds, and it is noise, not a figure.
		w("| streamer: the daemon's CPU while a client reads through it, against while a client reads ustreamer's socket directly (`/proc/PID/stat` utime+stime, ms a second; rounds %s against %s; idle without a streamer: %.0f %% of a core) | %.0f against %.0f ms/s |",
			fmtList(sf.cpuRelay, "%.0f"), fmtList(sf.cpuBeside, "%.0f"), sf.idlePct, median(sf.cpuRelay), median(sf.cpuBeside))
		w("| streamer: that difference a frame relayed (rounds %s): **within the noise** of the daemon's own work under TCG, not a measure of the relay | %.1f ms |", fmtList(sf.cpuPerFrame, "%.1f"), median(sf.cpuPerFrame))
		w("| streamer: a stream request with the streamer stopped to its first frame, through the daemon | %.0f ms |", sf.firstFrame)
		w("| streamer: `kill -9` of ustreamer to a snapshot from the new one (1 s backoff) | %.1f s |", sf.restart.Seconds())
		w("| streamer: the last client gone to ustreamer stopped (`--streamer-shutdown-delay` 10 s) | %.1f s |", sf.stopAfter.Seconds())
	}
	if hf := f.h264; hf.firstMS > 0 {
		w("| H.264 (ffmpeg's libx264 in the guest, from ustreamer's MJPEG of vivid at 640x480): a Direct H.264 request (`/api/media/ws?video=h264`, the forwarded port) with the encoder stopped to its first unit | %.0f ms |", hf.firstMS)
		w("| H.264: units a second that client got, and bytes a unit (taking all the emulated CPU there is with ustreamer) | %.1f, %d B |", hf.fps, hf.bytes)
		w("| H.264: a WHEP offer of the guest's WebRTC peer (pion) to its first unit, the encoder running; its units a second | %.0f ms, %.1f |", hf.webrtcMS, hf.webrtcFPS)
		w("| H.264: vivid switched to 1280x720 to the first unit of that size (a new ustreamer picture, a new encoder) | %.1f s |", hf.resizeMS/1000)
	}
	if med, maxd := durationMedian(f.signalToEvent); len(f.signalToEvent) > 0 {
		w("| vivid's signal switched (`v4l2-ctl -c dv_timings_signal_mode`, no signal and back) to the `streamer` event at an `/api/ws` client, median of %d (max) | %.2f s (%.2f s) |",
			len(f.signalToEvent), med.Seconds(), maxd.Seconds())
	}
	if f.hidLatencyMedian > 0 {
		w("| keyboard: `/api/ws` key message to its `EV_KEY` at the guest's input layer, median of 1000 (written over the daemon's unix socket by a client in the guest, timed until the event is read from the keyboard's `/dev/input/event*`: parsing, the queue, the write to `/dev/hidg0`, dummy_hcd and usbhid) | %.2f ms |", float64(f.hidLatencyMedian)/1000)
		w("| keyboard: the same, 99th percentile | %.2f ms |", float64(f.hidLatencyP99)/1000)
		w("| `POST /api/hid/print`, default (no delay between key events; kvmd's default too), 500 lower-case characters, first press to last release at the guest | %.0f characters/s |", f.hidRate)
		w("| `POST /api/hid/print?slow=1` (20 ms before each key event, kvmd's slow rate: at most 25 characters/s), 100 characters | %.1f characters/s |", f.hidSlowRate)
	}
	if f.msdHostReadMBps > 0 {
		w("| virtual media: a 1 MiB ISO uploaded through the daemon (HTTPS through qemu's forwarded port) | %.1f MiB/s |", f.msdUploadMiBps)
		w("| virtual media: the host side reading the 8 MiB flash image from the LUN (`dd iflag=direct bs=1M`, dummy_hcd) | %.1f MB/s |", f.msdHostReadMBps)
	}
	w("| install boot: `apt install ./kvmd_*.deb` in the never-booted system, power off | %.0f s |", f.install.Seconds())
	if f.imageBuilt {
		w("| root file system built with mmdebstrap (not cached: a cold run) | %.0f s |", f.image.Seconds())
	} else {
		w("| root file system taken from the cache (a warm run) | %.1f s |", f.image.Seconds())
	}
	w("%s", benchmd.End(benchSection))
	return b.String()
}
