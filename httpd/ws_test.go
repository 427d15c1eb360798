package httpd

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"periph.io/x/conn/v3/gpio"
	"periph.io/x/conn/v3/gpio/gpiotest"

	"kvmd/atx"
	"kvmd/events"
	"kvmd/streamer"
	"kvmd/subsystem"
)

// atxBoard is an ATX board on gpiotest pins.
type atxBoard struct {
	powerLED, hddLED, powerSw, resetSw *gpiotest.Pin
	ctl                                *atx.Controller
}

func newATXBoard(t *testing.T, hub *events.Hub) *atxBoard {
	t.Helper()
	b := &atxBoard{
		powerLED: &gpiotest.Pin{N: "GPIO24"}, hddLED: &gpiotest.Pin{N: "GPIO22"},
		powerSw: &gpiotest.Pin{N: "GPIO23"}, resetSw: &gpiotest.Pin{N: "GPIO27"},
	}
	ctl, err := atx.New(atx.Config{
		Pins: &atx.Pins{PowerLED: b.powerLED, HDDLED: b.hddLED, PowerSwitch: b.powerSw, ResetSwitch: b.resetSw},
		// Short enough for a test to wait out.
		AfterRelease: 50 * time.Millisecond, LongClickDelay: 50 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	// As the daemon runs them: the board, and its subsystem's watcher
	// publishing on hub.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { ctl.Run(ctx) })
	wg.Go(func() { subsystem.Watch(ctx, subsystem.Of[atx.State](atx.Subsystem{C: ctl}), hub) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	b.ctl = ctl
	return b
}

func setLevel(p *gpiotest.Pin, l gpio.Level) {
	p.Lock()
	p.L = l
	p.Unlock()
}

// testDevices are devices with an ATX board on fake pins and fixed states
// for the others, standing for what package devices reads.
func testDevices(t *testing.T) (*Devices, *atxBoard) {
	hub := &events.Hub{}
	b := newATXBoard(t, hub)
	return &Devices{
		Events: hub, ATX: b.ctl, Version: "4.108.1",
		Subsystems: testSubsystems(atx.Subsystem{C: b.ctl}, nil),
		GPIO:       oneChannel("v3_usb_breaker"),
	}, b
}

// testSubsystems are the subsystems of the greeting, in kvmd's order:
// the ATX board a, the "msd" subsystem msd (nil: a fake), then extra
// (info, hid_keymaps) before the streamer's clients (none); the others
// fakes whose state is {"from": name}.
func testSubsystems(a atx.Subsystem, msdSub subsystem.Subsystem, extra ...subsystem.Subsystem) []subsystem.Subsystem {
	if msdSub == nil {
		msdSub = fakeSubsystem("msd")
	}
	subs := []subsystem.Subsystem{fakeSubsystem("gpio"), fakeSubsystem("hid"), subsystem.Of[atx.State](a), msdSub, fakeSubsystem("streamer")}
	subs = append(subs, extra...)
	return append(subs, subsystem.Of[streamer.Clients](streamer.ClientsSubsystem{}))
}

// fake is a subsystem whose state is {"from": its name}, never changing.
type fake string

func (f fake) Name() string                                      { return string(f) }
func (f fake) State(context.Context) map[string]any              { return map[string]any{"from": string(f)} }
func (f fake) Watch(ctx context.Context, _ func(map[string]any)) { <-ctx.Done() }

func fakeSubsystem(name string) subsystem.Subsystem { return subsystem.Of[map[string]any](fake(name)) }

// oneChannel is a board with one GPIO channel.
type oneChannel string

func (c oneChannel) HasChannel(name string) bool { return name == string(c) }

// wsGreetingLen is the count of events a new WebSocket client is sent first:
// loop, the five subsystems' states, then clients (kvmd's server.py).
const wsGreetingLen = 7

func wsURL(e *env, query string) string {
	return "ws" + strings.TrimPrefix(e.base, "http") + "/api/ws" + query
}

func dialWS(t *testing.T, e *env, query string, hdr http.Header) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(e, query), &websocket.DialOptions{HTTPHeader: hdr})
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

var adminHeader = http.Header{"X-Kvmd-User": {"admin"}, "X-Kvmd-Passwd": {"admin-pass"}}

type wsEvent struct {
	Type  string          `json:"event_type"`
	Event json.RawMessage `json:"event"`
}

func readEvent(t *testing.T, c *websocket.Conn) wsEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	typ, b, err := c.Read(ctx)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.MessageText {
		t.Fatalf("message type %v, want text: %q", typ, b)
	}
	var ev wsEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatalf("not an event: %q", b)
	}
	return ev
}

// readUntil reads events until one of type typ satisfies ok.
func readUntil(t *testing.T, c *websocket.Conn, typ string, ok func(json.RawMessage) bool) {
	t.Helper()
	for {
		ev := readEvent(t, c)
		if ev.Type == typ && ok(ev.Event) {
			return
		}
	}
}

func TestWSInitialStateThenATXEvent(t *testing.T) {
	d, b := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	c := dialWS(t, e, "?stream=0", adminHeader)

	var got []string
	for range wsGreetingLen {
		ev := readEvent(t, c)
		got = append(got, ev.Type)
		switch ev.Type {
		case "loop":
			if string(ev.Event) != `{"version":{"major":4,"minor":108}}` {
				t.Errorf("loop event %s", ev.Event)
			}
		case "atx":
			var st atx.State
			json.Unmarshal(ev.Event, &st)
			if !st.Enabled || st.Leds.Power {
				t.Errorf("initial atx %s", ev.Event)
			}
		case "gpio", "hid", "msd", "streamer":
			if string(ev.Event) != `{"from":"`+ev.Type+`"}` {
				t.Errorf("%s event %s", ev.Type, ev.Event)
			}
		case "clients":
			if string(ev.Event) != `{"count":0}` {
				t.Errorf("clients event %s", ev.Event)
			}
		}
	}
	if want := "loop gpio hid atx msd streamer clients"; strings.Join(got, " ") != want {
		t.Errorf("initial events %q, want %q", strings.Join(got, " "), want)
	}

	// The host powers up: its power LED lights, and an atx event follows.
	start := time.Now()
	setLevel(b.powerLED, gpio.High)
	readUntil(t, c, "atx", func(ev json.RawMessage) bool {
		var st atx.State
		return json.Unmarshal(ev, &st) == nil && st.Leds.Power
	})
	t.Logf("LED change to event: %v", time.Since(start))

	// A click through the API shows busy, then idle.
	r := e.req("POST", "/api/atx/click?button=reset", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}, "")
	if r.status != 200 {
		t.Fatalf("click: %d %s", r.status, r.body)
	}
	readUntil(t, c, "atx", func(ev json.RawMessage) bool {
		var st atx.State
		return json.Unmarshal(ev, &st) == nil && st.Busy && st.Acts.Reset
	})
	readUntil(t, c, "atx", func(ev json.RawMessage) bool {
		var st atx.State
		return json.Unmarshal(ev, &st) == nil && !st.Busy
	})
}

func TestWSPingPong(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	c := dialWS(t, e, "", adminHeader)
	for range wsGreetingLen {
		readEvent(t, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"event_type":"ping","event":{}}`)); err != nil {
		t.Fatal(err)
	}
	if ev := readEvent(t, c); ev.Type != "pong" || string(ev.Event) != "{}" {
		t.Errorf("after ping: %+v", ev)
	}
	// kvmd's binary ping: a message whose first byte is 0; the answer is
	// the byte 255.
	if err := c.Write(ctx, websocket.MessageBinary, []byte{0}); err != nil {
		t.Fatal(err)
	}
	typ, b, err := c.Read(ctx)
	if err != nil || typ != websocket.MessageBinary || string(b) != "\xff" {
		t.Errorf("after binary ping: %v %q %v", typ, b, err)
	}
	// Garbage is ignored, the connection lives on.
	c.Write(ctx, websocket.MessageText, []byte(`not json`))
	c.Write(ctx, websocket.MessageText, []byte(`{"event_type":"ping","event":{}}`))
	if ev := readEvent(t, c); ev.Type != "pong" {
		t.Errorf("after garbage and ping: %+v", ev)
	}
}

func TestWSAuth(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	for _, tc := range []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"none", nil, 401},
		{"wrong", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "nope"}, 403},
		{"bad stream", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}, 400},
		{"another site", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass", "Origin": "https://evil.example"}, 403},
		{"no handshake", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass", "Upgrade": "", "Connection": "keep-alive"}, 400},
		{"old version", map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass", "Sec-WebSocket-Version": "8"}, 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := map[string]string{"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
			for k, v := range tc.hdr {
				hdr[k] = v
			}
			q := ""
			if tc.name == "bad stream" {
				q = "?stream=maybe"
			}
			if r := e.req("GET", "/api/ws"+q, hdr, ""); r.status != tc.status {
				t.Errorf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
		})
	}
	// Basic and the session cookie work as on every endpoint.
	dialWS(t, e, "", http.Header{"Authorization": {"Basic YWRtaW46YWRtaW4tcGFzcw=="}})
	tok := e.login("admin", "admin-pass")
	dialWS(t, e, "", http.Header{"Cookie": {"auth_token=" + tok}})
}

// TestWSEndsWithRequestContext: the socket closes when the request's
// context ends, which is how a session's end (issue 18: logout, DELETE,
// expiry) reaches it, and when the server shuts down.
func TestWSEndsWithRequestContext(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	var mu sync.Mutex
	var cancels []context.CancelFunc
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithCancel(r.Context())
		mu.Lock()
		cancels = append(cancels, cancel)
		mu.Unlock()
		e.srv.ServeHTTP(w, r.WithContext(ctx))
	}))
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(ts.URL, "http")+"/api/ws", &websocket.DialOptions{HTTPHeader: adminHeader})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseNow()
	for range wsGreetingLen {
		readEvent(t, c)
	}
	mu.Lock()
	for _, f := range cancels {
		f()
	}
	mu.Unlock()
	_, _, err = c.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("after the context ended: %v, want a close with status 1008", err)
	}

	// Shutdown closes the sockets on the real listener.
	c2 := dialWS(t, e, "", adminHeader)
	for range wsGreetingLen {
		readEvent(t, c2)
	}
	e.shutdown()
	_, _, err = c2.Read(ctx)
	if websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("after shutdown: %v, want a close with status 1001", err)
	}
}

// TestWSLogoutClosesSocket: logging out ends the session's requests
// (their contexts are cancelled), and the socket closes with 1008; ws
// only has to stop on r.Context().Done(), as tested above.
func TestWSLogoutClosesSocket(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	tok := e.login("admin", "admin-pass")
	c := dialWS(t, e, "", http.Header{"Cookie": {"auth_token=" + tok}})
	for range wsGreetingLen {
		readEvent(t, c)
	}
	if r := e.req("POST", "/api/auth/logout", map[string]string{"Cookie": "auth_token=" + tok}, ""); r.status != 200 {
		t.Fatalf("logout: %d", r.status)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	if ctx.Err() != nil {
		t.Fatal("the socket outlived its session by 2 s")
	}
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation {
		t.Errorf("after logout: %v, want a close with status 1008", err)
	}
}

// TestWSSlowClientDropped: a client that reads nothing is dropped once its
// queue is full, while another keeps receiving.
func TestWSSlowClientDropped(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	slow := dialWS(t, e, "", adminHeader)
	fast := dialWS(t, e, "", adminHeader)
	fast.SetReadLimit(1 << 20)
	for range wsGreetingLen {
		readEvent(t, fast)
	}
	eventually(t, "both subscribed", func() bool { return d.Events.Len() == 2 })
	// Big events fill the slow client's socket buffers, then its queue.
	big := strings.Repeat("x", 64<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The fast client reads each event before the next is published,
	// so it never falls behind however slow this machine is.
	for i := range 400 {
		d.Events.Publish("test", big)
		if _, _, err := fast.Read(ctx); err != nil {
			t.Fatalf("the reading client, event %d: %v", i, err)
		}
	}
	eventually(t, "slow client dropped", func() bool { return d.Events.Len() == 1 })
	_ = slow
}

func TestATXEndpoints(t *testing.T) {
	d, b := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	admin := map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}
	r := e.req("GET", "/api/atx", admin, "")
	if r.status != 200 || !strings.Contains(string(r.body), `"result":{"enabled":true,"busy":false,"acts":{"power":false,"reset":false},"leds":{"power":false,"hdd":false}}`) {
		t.Errorf("GET /api/atx: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		path, errName string
		status        int
	}{
		{"/api/atx/power", "ValidatorError", 400},
		{"/api/atx/power?action=explode", "ValidatorError", 400},
		{"/api/atx/power?action=on&wait=perhaps", "ValidatorError", 400},
		{"/api/atx/click?button=eject", "ValidatorError", 400},
		{"/api/atx/power?action=off", "", 200}, // already off: nothing to do
		{"/api/atx/click?button=power", "", 200},
		{"/api/atx/click?button=power_long", "AtxIsBusyError", 409},
		// A reset now is refused too: TestATXOneBusyRegion, on a fake clock.
	} {
		r := e.req("POST", tc.path, admin, "")
		if r.status != tc.status || r.errName != tc.errName {
			t.Errorf("POST %s: %d %s, want %d %s", tc.path, r.status, r.errName, tc.status, tc.errName)
		}
	}
	if st := b.ctl.State(); !st.Acts.Power && !st.Busy {
		// The power click lasts 100 ms + 50 ms: it may have ended; no check.
		_ = st
	}

	// A board without ATX wiring answers as kvmd's disabled ATX.
	d2, _ := testDevices(t)
	d2.ATX, d2.Subsystems = nil, testSubsystems(atx.Subsystem{}, nil)
	e2 := newEnv(t, envOpts{devices: d2})
	r = e2.req("GET", "/api/atx", admin, "")
	if r.status != 200 || !strings.Contains(string(r.body), `{"enabled":false,"busy":false,"acts":{"power":false,"reset":false},"leds":{"power":false,"hdd":false}}`) {
		t.Errorf("disabled GET /api/atx: %d %s", r.status, r.body)
	}
	for _, p := range []string{"/api/atx/power?action=on", "/api/atx/click?button=reset"} {
		if r := e2.req("POST", p, admin, ""); r.status != 400 || r.errName != "AtxDisabledError" {
			t.Errorf("disabled POST %s: %d %s", p, r.status, r.errName)
		}
	}
}

func TestDeviceEndpoints(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d})
	admin := map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}
	for _, p := range []string{"gpio", "hid", "msd", "streamer"} {
		r := e.req("GET", "/api/"+p, admin, "")
		if r.status != 200 || string(r.body) != `{"ok":true,"result":{"from":"`+p+`"}}` {
			t.Errorf("GET /api/%s: %d %s", p, r.status, r.body)
		}
		if r := e.req("GET", "/api/"+p, nil, ""); r.status != 401 {
			t.Errorf("GET /api/%s without credentials: %d", p, r.status)
		}
	}
	for _, tc := range []struct {
		method, path, errName string
		status                int
	}{
		{"POST", "/api/gpio/switch?state=1", "ValidatorError", 400},
		{"POST", "/api/gpio/switch?channel=v3_usb_breaker", "ValidatorError", 400},
		{"POST", "/api/gpio/switch?channel=nope&state=1", "GpioChannelNotFoundError", 400},
		{"POST", "/api/gpio/switch?channel=v3_usb_breaker&state=1", "GpioSwitchNotSupported", 400},
		{"POST", "/api/gpio/pulse?channel=v3_usb_breaker&delay=x", "ValidatorError", 400},
		{"POST", "/api/gpio/pulse?channel=v3_usb_breaker", "GpioPulseNotSupported", 400},
		{"POST", "/api/msd/write?image=a.iso", "MsdDisabledError", 400},
		{"POST", "/api/msd/set_connected?connected=1", "MsdDisabledError", 400},
		{"GET", "/api/msd/read?image=a.iso", "MsdDisabledError", 400},
		{"GET", "/api/streamer/snapshot", "UnavailableError", 503},
		{"POST", "/api/streamer/set_params?quality=80", "UnavailableError", 503},
	} {
		r := e.req(tc.method, tc.path, admin, "")
		if r.status != tc.status || r.errName != tc.errName || r.errMsg == "" {
			t.Errorf("%s %s: %d %s %q, want %d %s", tc.method, tc.path, r.status, r.errName, r.errMsg, tc.status, tc.errName)
		}
	}
}

// TestWSOutlivesServerTimeouts: a quiet WebSocket is not cut by the
// server's header or idle timeouts, which are for HTTP requests.
func TestWSOutlivesServerTimeouts(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{devices: d, headerTimeout: 200 * time.Millisecond, bodyTimeout: 200 * time.Millisecond})
	c := dialWS(t, e, "", adminHeader)
	for range wsGreetingLen {
		readEvent(t, c)
	}
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"event_type":"ping","event":{}}`)); err != nil {
		t.Fatal(err)
	}
	if ev := readEvent(t, c); ev.Type != "pong" {
		t.Errorf("after a quiet second: %+v", ev)
	}
}
