// Command kvmd-input is the booted test's look at the guest's input layer,
// built for arm64 by the test and copied into the guest (Debian's evtest
// reads events but writes none):
//
//	kvmd-input find               the gadget's keyboard, mouse and relmouse (relative) event nodes
//	kvmd-input watch DEV...       "ready", then a line per event: index, time, type, code, value
//	kvmd-input led DEV CODE VAL   writes an EV_LED event, as a host's Caps Lock does
//	kvmd-input held DEV           the keys the input layer holds down (EVIOCGKEY)
//	kvmd-input wsbench SOCK DEV N N key messages to the daemon's /api/ws over its unix
//	                              socket (root: peer credentials), each timed until
//	                              its EV_KEY comes on DEV; prints the times in µs
//
// Only the test builds it; it is no part of the package.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/coder/websocket"
	"golang.org/x/sys/unix"
)

// The gadget's IDs (kvmd-otg's defaults, otg.DefaultSettings).
const ids = "Vendor=1d6b Product=0104"

const (
	evSyn      = 0
	evKey      = 1
	evLED      = 0x11
	synDropped = 3
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "kvmd-input:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return errors.New("usage: find | watch DEV... | led DEV CODE VALUE | held DEV | wsbench SOCK DEV N")
	}
	switch args[0] {
	case "find":
		return find()
	case "watch":
		return watch(args[1:])
	case "led":
		if len(args) != 4 {
			return errors.New("led DEV CODE VALUE")
		}
		code, _ := strconv.Atoi(args[2])
		val, _ := strconv.Atoi(args[3])
		return led(args[1], code, val)
	case "held":
		if len(args) != 2 {
			return errors.New("held DEV")
		}
		return held(args[1])
	case "wsbench":
		if len(args) != 4 {
			return errors.New("wsbench SOCK DEV N")
		}
		n, _ := strconv.Atoi(args[3])
		return wsbench(args[1], args[2], n)
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// find prints the gadget's keyboard (handlers kbd and leds), mouse (a
// mouse handler and absolute axes) and relmouse (a mouse handler, no
// absolute axis: the relative mouse) from /proc/bus/input/devices.
func find() error {
	b, err := os.ReadFile("/proc/bus/input/devices")
	if err != nil {
		return err
	}
	for _, block := range strings.Split(string(b), "\n\n") {
		if !strings.Contains(block, ids) {
			continue
		}
		var hs []string
		abs := false
		for _, l := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(l, "H: Handlers="); ok {
				hs = strings.Fields(v)
			}
			abs = abs || strings.HasPrefix(l, "B: ABS=")
		}
		var ev, kind string
		for _, h := range hs {
			switch {
			case strings.HasPrefix(h, "event"):
				ev = h
			case h == "leds":
				kind = "keyboard"
			case strings.HasPrefix(h, "mouse") && kind == "" && abs:
				kind = "mouse"
			case strings.HasPrefix(h, "mouse") && kind == "":
				kind = "relmouse"
			}
		}
		if ev != "" && kind != "" {
			fmt.Printf("%s /dev/input/%s\n", kind, ev)
		}
	}
	return nil
}

// event is struct input_event on a 64-bit kernel.
type event struct {
	Sec, Usec  int64
	Type, Code uint16
	Value      int32
}

func readEvent(f *os.File) (event, error) {
	var buf [24]byte
	if _, err := f.Read(buf[:]); err != nil {
		return event{}, err
	}
	return parseEvent(buf[:]), nil
}

func parseEvent(b []byte) event {
	return event{
		Sec: int64(binary.LittleEndian.Uint64(b[0:])), Usec: int64(binary.LittleEndian.Uint64(b[8:])),
		Type: binary.LittleEndian.Uint16(b[16:]), Code: binary.LittleEndian.Uint16(b[18:]),
		Value: int32(binary.LittleEndian.Uint32(b[20:])),
	}
}

// watch holds the nodes open (usbhid polls the device only while it is
// read) and prints their events, without EV_SYN but for SYN_DROPPED (the
// kernel's buffer for this reader overflowed: events were lost here, not
// by the device), which prints as "dropped". It reads many events a
// system call and writes their lines together, to keep up under TCG.
func watch(devs []string) error {
	var files []*os.File
	for _, d := range devs {
		f, err := os.Open(d)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	var mu sync.Mutex
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	fmt.Fprintln(w, "ready")
	w.Flush()
	var wg sync.WaitGroup
	for i, f := range files {
		wg.Go(func() {
			buf := make([]byte, 24*256)
			for {
				n, err := f.Read(buf)
				mu.Lock()
				if err != nil {
					fmt.Fprintf(w, "%d end %v\n", i, err)
					w.Flush()
					mu.Unlock()
					return
				}
				for off := 0; off+24 <= n; off += 24 {
					e := parseEvent(buf[off : off+24])
					switch {
					case e.Type == evSyn && e.Code == synDropped:
						fmt.Fprintf(w, "%d dropped\n", i)
					case e.Type != evSyn:
						fmt.Fprintf(w, "%d %d.%06d %d %d %d\n", i, e.Sec, e.Usec, e.Type, e.Code, e.Value)
					}
				}
				w.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return nil
}

func write(f *os.File, typ, code uint16, value int32) error {
	var buf [24]byte
	binary.LittleEndian.PutUint16(buf[16:], typ)
	binary.LittleEndian.PutUint16(buf[18:], code)
	binary.LittleEndian.PutUint32(buf[20:], uint32(value))
	_, err := f.Write(buf[:])
	return err
}

func led(dev string, code, value int) error {
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := write(f, evLED, uint16(code), int32(value)); err != nil {
		return err
	}
	return write(f, evSyn, 0, 0)
}

// held prints the codes of the keys held (EVIOCGKEY).
func held(dev string) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	var bits [96]byte // KEY_MAX 0x2ff
	// EVIOCGKEY(len): _IOC(_IOC_READ, 'E', 0x18, len).
	req := uintptr(2)<<30 | uintptr(len(bits))<<16 | uintptr('E')<<8 | 0x18
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), req, uintptr(unsafe.Pointer(&bits[0]))); e != 0 {
		return e
	}
	var codes []string
	for i, b := range bits {
		for j := range 8 {
			if b&(1<<j) != 0 {
				codes = append(codes, strconv.Itoa(i*8+j))
			}
		}
	}
	fmt.Println(strings.Join(codes, " "))
	return nil
}

// wsbench times key messages from the daemon's /api/ws to the input layer.
func wsbench(sock, dev string, n int) error {
	f, err := os.Open(dev)
	if err != nil {
		return err
	}
	defer f.Close()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	ctx := context.Background()
	c, _, err := websocket.Dial(ctx, "ws://localhost/api/ws?stream=0", &websocket.DialOptions{HTTPClient: hc})
	if err != nil {
		return err
	}
	defer c.CloseNow()
	go func() { // the events the daemon sends are not wanted
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}()
	const keyA = 30
	for i := range n {
		state := i%2 == 0
		msg := fmt.Sprintf(`{"event_type":"key","event":{"key":"KeyA","state":%v}}`, state)
		start := time.Now()
		if err := c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
			return err
		}
		want := int32(0)
		if state {
			want = 1
		}
		for {
			e, err := readEvent(f)
			if err != nil {
				return err
			}
			if e.Type == evKey && e.Code == keyA && e.Value == want {
				break
			}
		}
		fmt.Println(time.Since(start).Microseconds())
	}
	return nil
}
