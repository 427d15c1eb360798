package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// TestServeReleasesATXOnSIGTERM runs the demo daemon, long-presses the
// demo host's power button (power_long: 5.5 s) and sends SIGTERM a second
// into the press. The daemon must let go of the button before it exits:
// on a GPIO that keeps its level the button would otherwise stay held
// while the daemon is down. The demo's button logs its presses and
// releases.
func TestServeReleasesATXOnSIGTERM(t *testing.T) {
	users := usersFile(t, "admin", "secret")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--demo", "--users", users, "--listen", addr)
	d.stderr.wait(t, `kvmd listening`)
	req, _ := http.NewRequest("POST", "http://"+addr+"/api/atx/click?button=power_long", nil)
	req.SetBasicAuth("admin", "secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("power_long: %d %s", resp.StatusCode, body)
	}
	d.stderr.wait(t, `demo host: power button pressed`)
	time.Sleep(time.Second)
	start := time.Now()
	if err := d.stop(t); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	took := time.Since(start)
	log := d.stderr.String()
	pressed := strings.Index(log, "demo host: power button pressed")
	released := strings.Index(log, "demo host: power button released")
	stopping := strings.Index(log, "shutting down")
	if released < pressed || stopping < 0 {
		t.Fatalf("the power button was not released before exit:\n%s", log)
	}
	// Released on the way out, not by the press running its 5.5 s.
	if took > 4*time.Second {
		t.Errorf("exit took %v: the daemon waited for the press", took)
	}
	t.Logf("exit %v after SIGTERM", took.Round(time.Millisecond))
}
