package demo

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"kvmd/gadget"
	"kvmd/hid"
	"kvmd/hid/hidtest"
)

// hidHost is the demo's host computer at the far side of the keyboard and
// mouse (there is no gadget in the demo): it logs what it is typed, as
// en-us would type it ("demo host typed"), and where the mouse goes; a
// Caps Lock or Num Lock press toggles its LED and sends the keyboard the
// output report, as a real host does, so /api/hid's LEDs follow.
type hidHost struct {
	host   *hidtest.Host
	log    *slog.Logger
	chars  map[hid.Stroke]rune
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func startHIDHost(log *slog.Logger) *hidHost {
	h := &hidHost{host: hidtest.NewHost(), log: log, chars: map[hid.Stroke]rune{}}
	if us, err := hid.BuiltinKeymaps().Get("en-us"); err == nil {
		for r := rune(0x20); r < 0x7f; r++ {
			if s := us.Strokes(r); len(s) == 1 {
				h.chars[s[0]] = r
			}
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.wg.Go(func() { h.keyboard(ctx) })
	h.wg.Go(func() { h.mouse(ctx) })
	return h
}

// Open is hid.Config.Open for the demo.
func (h *hidHost) Open(function string, writeOnly bool) (hid.File, error) {
	return h.host.Open(function, writeOnly)
}

func (h *hidHost) close() {
	h.cancel()
	h.host.Close()
	h.wg.Wait()
}

func (h *hidHost) keyboard(ctx context.Context) {
	var prev []byte
	var line strings.Builder
	var leds byte
	flush := func() {
		if line.Len() > 0 {
			h.log.Info("demo host typed", "text", line.String())
			line.Reset()
		}
	}
	for ctx.Err() == nil {
		r, err := h.host.Read(gadget.Keyboard, 500*time.Millisecond)
		if err != nil {
			flush()
			continue
		}
		if len(r) != hid.KeyboardReportLen {
			continue
		}
		shift := r[0]&0x22 != 0
		altgr := r[0]&0x40 != 0
		for _, u := range r[2:] {
			if u == 0 || (len(prev) == len(r) && slices.Contains(prev[2:], u)) {
				continue // held already, or no key
			}
			var k hid.Key
			for _, kk := range hid.Keys() {
				if kk.Usage == u {
					k = kk
				}
			}
			switch k.Name {
			case "Enter":
				line.WriteString("⏎")
				flush()
				continue
			case "CapsLock", "NumLock":
				leds ^= map[string]byte{"NumLock": 1, "CapsLock": 2}[k.Name]
				h.host.SetLEDs(gadget.Keyboard, leds)
			}
			if c, ok := h.chars[hid.Stroke{Key: k, Shift: shift, AltGr: altgr}]; ok && r[0]&^0x62 == 0 {
				line.WriteRune(c)
			} else {
				line.WriteString("[" + hidtest.Keys(r) + "]")
			}
		}
		prev = r
	}
	flush()
}

// mouse logs where the pointer is and the buttons held, at most twice a
// second, as pixels of a 1920x1080 screen.
func (h *hidHost) mouse(ctx context.Context) {
	var last string
	var shown time.Time
	for ctx.Err() == nil {
		r, err := h.host.Read(gadget.Mouse, 500*time.Millisecond)
		if err == nil && len(r) >= 6 {
			x := int(binary.LittleEndian.Uint16(r[1:])) * 1919 / 32767
			y := int(binary.LittleEndian.Uint16(r[3:])) * 1079 / 32767
			last = fmt.Sprintf("x=%d y=%d buttons=%#x wheel=%d", x, y, r[0], int8(r[5]))
		}
		if last != "" && time.Since(shown) > 500*time.Millisecond {
			h.log.Info("demo host mouse", "at", last)
			last, shown = "", time.Now()
		}
	}
}
