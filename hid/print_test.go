package hid

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"kvmd/gadget"
)

// TestTypeSeq: the presses a print makes as it types are those of
// Keymap.Type of the whole text, with Shift and AltGr held across the
// characters that need them, dead keys, line ends of every kind, and
// characters skipped.
func TestTypeSeq(t *testing.T) {
	ks := BuiltinKeymaps()
	for _, name := range []string{"en-us", "de", "fr"} {
		km, err := ks.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Repeat("Hallo WELT @ 3€ {x}\tÄÖÜ straße ê^x\r\nZ\r日本\n", 50)
		want, _ := km.Type(text)
		got := slices.Collect(typeSeq(km, text))
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d presses made as typed, %d by Type", name, len(got), len(want))
		}
		// Taken only in part: it stops.
		n := 0
		for range typeSeq(km, text) {
			if n++; n == 10 {
				break
			}
		}
	}
}

// drain reads what the host's keyboard gets until the test ends.
func drain(t *testing.T, h *host) {
	end := h.end(gadget.Keyboard)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		buf := make([]byte, 64)
		for {
			select {
			case <-stop:
				return
			default:
			}
			end.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
			end.Read(buf)
		}
	}()
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestPrintHeldMemory: a 1 MiB print holds its text and a piece's key
// events while it types, not an event of every character (about 230 times
// the text before the mend); a reset stops it at once, from its start.
func TestPrintHeldMemory(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	drain(t, h)
	text := strings.Repeat("The quick brown FOX jumps over the lazy dog.\n", (1<<20)/45)
	before := liveHeap()
	errc := make(chan error, 1)
	go func() { errc <- d.Print(context.Background(), text, "", 0) }()
	eventually(t, func() bool { return d.State().Busy }, func() string { return "the print never began" })
	var most uint64
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		most = max(most, liveHeap())
	}
	resetStops(t, d, errc)
	if most > before && most-before > 8<<20 {
		t.Errorf("a 1 MiB print held %d MiB more", (most-before)>>20)
	}
	t.Logf("held %d KiB more while typing", (int64(most)-int64(before))>>10)
}

// TestResetStopsPrintBeingPrepared: a reset just after a print began
// stops it, whatever the print was doing: before the mend a print made
// every key event of its text first, and a reset then found no print to
// stop (it typed on for seconds after).
func TestResetStopsPrintBeingPrepared(t *testing.T) {
	shorten(t)
	h := newHost(t)
	d := start(t, h, Config{})
	drain(t, h)
	text := strings.Repeat("Some Text To Type, 1 MiB of it.\n", (1<<20)/32)
	errc := make(chan error, 1)
	go func() { errc <- d.Print(context.Background(), text, "", 0) }()
	// The reset comes once the print has begun (a reset before it
	// stops nothing, and a print after it types its whole text): a fixed
	// 20 ms was too short under the race detector on a loaded machine,
	// where the test failed 'the print went on after the reset'.
	eventually(t, func() bool { return d.State().Busy }, func() string { return "the print never began" })
	resetStops(t, d, errc)
}

// resetStops resets d and checks that the print whose error errc gets
// stops, interrupted, within 3 s.
func resetStops(t *testing.T, d *HID, errc <-chan error) {
	t.Helper()
	d.Reset()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrInterrupted) {
			t.Errorf("print returned %v, want ErrInterrupted", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the print went on after the reset")
	}
}
