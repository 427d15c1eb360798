package mailboxtest

import (
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"syscall"
	"testing"

	"kvmd/hw"
)

// A board that browned out at boot: vcgencmd get_throttled says
// throttled=0x50000 (raspberrypi/firmware issue 615), while the kernel's
// rpi_volt driver has long cleared what GET_THROTTLED reports.
func TestFirmwareThrottledAfterKernelPolls(t *testing.T) {
	f := New(0x50005) // under-voltage and throttled, now and since boot
	if got, err := f.KernelPoll(); err != nil || got != 0x50005 {
		t.Fatalf("kernel poll during the event: %#x, %v; want 0x50005", got, err)
	}
	f.SetFlags(0) // the supply recovers
	// The next poll still sees what happened since the last one; the one
	// after sees nothing.
	if got, err := f.KernelPoll(); err != nil || got != 0x50000 {
		t.Fatalf("first kernel poll after the event: %#x, %v; want 0x50000", got, err)
	}
	if got, err := f.KernelPoll(); err != nil || got != 0 {
		// "Voltage normalised (0x00000000)" in the kernel log.
		t.Fatalf("kernel poll after the event: %#x, %v; want 0", got, err)
	}

	got, err := hw.FirmwareThrottled(f)
	if err != nil || got != 0x50000 {
		t.Errorf("FirmwareThrottled = %#x, %v; want 0x50000 (the history since boot)", got, err)
	}
	reqs := f.Requests()
	last := reqs[len(reqs)-1]
	if last.Tag != hw.TagGetGencmdResult || string(last.Value[4:18]) != "get_throttled\x00" {
		t.Errorf("kvmd sent tag %#x %q, want the get_throttled gencmd", last.Tag, last.Value[:18])
	}

	// The same through GET_THROTTLED would say 0: what the kernel left.
	v, err := hw.Property(f, hw.TagGetThrottled, make([]byte, 4), 4)
	if err != nil || fmt.Sprint(v) != "[0 0 0 0]" {
		t.Errorf("GET_THROTTLED after the kernel's polls: %v, %v; want 0", v, err)
	}
}

// A firmware that lacks the gencmd tag is asked GET_THROTTLED, with a
// request value of 0: reading must not clear what others read.
func TestFirmwareThrottledWithoutGencmd(t *testing.T) {
	f := New(0x50000)
	f.SetGencmd(false)
	for range 3 {
		got, err := hw.FirmwareThrottled(f)
		if err != nil || got != 0x50000 {
			t.Fatalf("FirmwareThrottled = %#x, %v; want 0x50000 every time", got, err)
		}
	}
	for _, r := range f.Requests() {
		switch r.Tag {
		case hw.TagGetGencmdResult:
		case hw.TagGetThrottled:
			if len(r.Value) != 4 || r.Value[0]|r.Value[1]|r.Value[2]|r.Value[3] != 0 {
				t.Errorf("GET_THROTTLED sent with value %x, want 0 (a mask would clear bits)", r.Value)
			}
		default:
			t.Errorf("unexpected tag %#x", r.Tag)
		}
	}
	// The kernel's poll, in contrast, clears.
	if _, err := f.KernelPoll(); err != nil {
		t.Fatal(err)
	}
	if got, _ := hw.FirmwareThrottled(f); got != 0 {
		t.Errorf("after the kernel's poll: %#x, want 0", got)
	}
}

func TestFirmwareThrottledErrors(t *testing.T) {
	f := New(0)
	f.SetErr(fmt.Errorf("open /dev/vcio: %w", fs.ErrNotExist))
	if _, err := hw.FirmwareThrottled(f); !hw.Absent(err) {
		t.Errorf("no device: %v, want absent", err)
	}
	f.SetErr(fmt.Errorf("open /dev/vcio: %w", fs.ErrPermission))
	if _, err := hw.FirmwareThrottled(f); err == nil || hw.Absent(err) {
		t.Errorf("no permission: %v, want an error that is not absence", err)
	}
	f.SetErr(nil)
	if got, err := hw.FirmwareThrottled(f); err != nil || got != 0 {
		t.Errorf("answering again: %#x, %v", got, err)
	}

	// An unknown command is the firmware's error, not unsupported.
	if _, err := hw.Gencmd(f, "no_such_command"); err == nil || errors.Is(err, hw.ErrFirmwareUnsupported) {
		t.Errorf("unknown gencmd: %v", err)
	}
	// An unknown tag is left unanswered.
	if _, err := hw.Property(f, 0x00099999, nil, 4); !errors.Is(err, hw.ErrFirmwareUnsupported) {
		t.Errorf("unknown tag: %v, want ErrFirmwareUnsupported", err)
	}
}

func TestCallChecksBuffers(t *testing.T) {
	f := New(0)
	for _, buf := range [][]uint32{
		nil,
		{8, 0, 0},                                // shorter than 12 bytes
		{14, 0, 0, 0},                            // not whole words
		{64, 0, 0},                               // longer than the buffer
		{28, 0, hw.TagGetThrottled, 64, 0, 0, 0}, // tag overruns the buffer
		{28, 0, hw.TagGetThrottled, 3, 0, 0, 0},  // value size not of whole words
	} {
		if err := f.Call(buf); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("Call(%v) = %v, want EINVAL", buf, err)
		}
	}
}

func TestConcurrent(t *testing.T) {
	f := New(0)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if i%2 == 0 {
				f.SetFlags(0x1)
			}
			if _, err := hw.FirmwareThrottled(f); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got, _ := hw.FirmwareThrottled(f); got != 0x10001 {
		t.Errorf("after concurrent updates: %#x, want 0x10001", got)
	}
}
