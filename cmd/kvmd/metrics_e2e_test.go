package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
	"kvmd/journal/journaltest"
)

// startPrometheus runs a Prometheus server of its own, in a temporary
// directory, scraping target's metrics every second with Basic
// credentials, and returns its address.
func startPrometheus(t *testing.T, target, user, passwd string) string {
	t.Helper()
	bin := testutil.NeedTool(t, "prometheus", "prometheus")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "passwd"), []byte(passwd+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: kvmd
    metrics_path: /api/export/prometheus/metrics
    basic_auth:
      username: %s
      password_file: %s
    static_configs:
      - targets: ['%s']
`, user, filepath.Join(dir, "passwd"), target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := testutil.FreeAddr(t)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--log.level=warn")
	out := &testutil.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("prometheus said:\n%s", out)
		}
	})
	return addr
}

// promQuery asks Prometheus's HTTP API for an instant query and returns
// the values of the result, "" when it has none yet.
func promQuery(ctx context.Context, addr, query string) ([]string, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/v1/query?query="+url.QueryEscape(query), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, err
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s %s", query, r.Status, r.Error)
	}
	var vals []string
	for _, s := range r.Data.Result {
		v, _ := s.Value[1].(string)
		vals = append(vals, v)
	}
	return vals, nil
}

// TestPrometheusEndToEnd has a real Prometheus server scrape the real
// daemon in demo mode and reads the demo board's values back through
// Prometheus's query API, under kvmd's names and PiKVM's. It takes about 6 s: Prometheus 2.42's scrape
// manager applies new targets on a fixed 5 s tick, so the first scrape
// comes 5 to 6 s after its start.
func TestPrometheusEndToEnd(t *testing.T) {
	start := time.Now()
	users := usersFile(t, "metrics", "scrape:secret")
	addr := testutil.FreeAddr(t)
	// Prometheus first: its first scrape is seconds away anyway.
	prom := startPrometheus(t, addr, "metrics", "scrape:secret")
	d := startDaemon(t, nil, nil, "serve", "--demo", "--users", users, "--listen", addr, "--access-log=false")
	d.stderr.wait(t, `kvmd listening`)

	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
	defer cancel()
	for _, q := range []struct{ query, want string }{
		{`up{job="kvmd"}`, "1"},
		{`kvmd_cpu_temperature_celsius{job="kvmd"}`, "62.322"},
		{`kvmd_memory_total_bytes`, "3976179712"},
		{`kvmd_gpio_level{pin="atx_power_led"}`, "1"},
		{`kvmd_hdmi_height_pixels`, "1080"},
		{`kvmd_auth_attempts_total{method="basic",result="ok"} > 0`, ""}, // any value
		{`go_goroutines > 0`, ""},
		// The runtime's and the process's families, written by package
		// metrics itself: a summary, a counter, gauges read from /proc.
		{`go_gc_duration_seconds{quantile="1"} >= 0`, ""},
		{`go_gc_duration_seconds_count >= 0`, ""},
		{`go_memstats_alloc_bytes_total > 0`, ""},
		{`process_resident_memory_bytes > 1e6`, ""},
		{`time() - process_start_time_seconds < 600`, ""},
		// PiKVM's names, beside kvmd's by default.
		{`pikvm_hw_temp_cpu{job="kvmd"}`, "62.322"},
		{`pikvm_hw_mem_total`, "3976179712"},
		{`pikvm_hw_throttling_undervoltage_now`, "0"},
		{`pikvm_atx_power`, "1"},
		{`pikvm_gpio_input_state_atx_power_led`, "1"},
	} {
		var last []string
		var err error
		for {
			last, err = promQuery(ctx, prom, q.query)
			if err == nil && len(last) == 1 && (q.want == "" || last[0] == q.want) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("%s: %v (err %v) after %s, want [%s]", q.query, last, err, time.Since(start).Round(time.Millisecond), q.want)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("%s = %s at %s", q.query, last[0], time.Since(start).Round(time.Millisecond))
	}
	t.Logf("values back from Prometheus %s after the start", time.Since(start).Round(time.Millisecond))
}

type scraped struct {
	status int
	body   string
}

func metricsGet(t *testing.T, addr, user, passwd string) scraped {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/export/prometheus/metrics", nil)
	if user != "" {
		req.SetBasicAuth(user, passwd)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return scraped{resp.StatusCode, string(b)}
}

// TestMetricsServe checks the daemon's wiring: the opt-out flag and its
// config key, and the log followers gauge following a real /api/log
// follow.
func TestMetricsServe(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--access-log=false")
	d.stderr.wait(t, `kvmd listening`)
	if got := metricsGet(t, addr, "", ""); got.status != 401 {
		t.Errorf("default, no credentials: %d, want 401", got.status)
	}
	d.stop(t)

	cfg := filepath.Join(t.TempDir(), "kvmd.yaml")
	os.WriteFile(cfg, []byte("metrics-auth: false\naccess-log: false\n"), 0o600)
	for _, args := range [][]string{{"--metrics-auth=false"}, {"--config", cfg}} {
		d := startDaemon(t, nil, nil, append([]string{"serve", "--users", users, "--listen", addr}, args...)...)
		d.stderr.wait(t, `kvmd listening`)
		if got := metricsGet(t, addr, "", ""); got.status != 200 || !strings.Contains(got.body, "kvmd_system_uptime_seconds ") {
			t.Errorf("%v, no credentials: %d, want 200 and the metrics", args, got.status)
		}
		resp, err := http.Get("http://" + addr + "/api/auth/check")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("%v: /api/auth/check without credentials %d, want 401", args, resp.StatusCode)
		}
		d.stop(t)
	}

	// --metrics-names and its config key turn either set off; a name
	// that is not one stops the daemon at start.
	os.WriteFile(cfg, []byte("metrics-auth: false\naccess-log: false\nmetrics-names: [pikvm]\n"), 0o600)
	for _, tc := range []struct {
		args        []string
		kvmd, pikvm bool
	}{
		{[]string{"--metrics-names=kvmd"}, true, false},
		{[]string{"--metrics-names", "pikvm"}, false, true},
		{[]string{"--config", cfg}, false, true},
		{[]string{"--config", cfg, "--metrics-names=kvmd,pikvm"}, true, true},
	} {
		d := startDaemon(t, nil, nil, append([]string{"serve", "--users", users, "--listen", addr, "--metrics-auth=false"}, tc.args...)...)
		d.stderr.wait(t, `kvmd listening`)
		got := metricsGet(t, addr, "", "")
		if k := strings.Contains(got.body, "\nkvmd_cpu_usage_percent "); k != tc.kvmd {
			t.Errorf("%v: kvmd's names %v, want %v", tc.args, k, tc.kvmd)
		}
		if p := strings.Contains(got.body, "\npikvm_hw_cpu_percent "); p != tc.pikvm {
			t.Errorf("%v: PiKVM's names %v, want %v", tc.args, p, tc.pikvm)
		}
		d.stop(t)
	}
	if _, stderr, err := runKvmd(t, "", "serve", "--users", users, "--listen", addr, "--metrics-names=prometheus"); err == nil ||
		!strings.Contains(stderr, "metrics-names") {
		t.Errorf("--metrics-names=prometheus: %v, want a refusal naming the flag:\n%s", err, stderr)
	}

	t.Run("log followers", func(t *testing.T) {
		journaltest.Require(t)
		dir := t.TempDir()
		w := journaltest.Start(t, dir, "system")
		w.Append(journaltest.Entry{Unit: "kvmd.service", Message: "hello"})
		w.Sync()
		d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr, "--journal-dir", dir, "--access-log=false")
		d.stderr.wait(t, `kvmd listening`)
		followers := func() string {
			m := regexp.MustCompile(`(?m)^kvmd_log_followers_active (\S+)$`).FindStringSubmatch(metricsGet(t, addr, "admin", "pw").body)
			if m == nil {
				t.Fatal("no kvmd_log_followers_active")
			}
			return m[1]
		}
		if n := followers(); n != "0" {
			t.Errorf("before a follow: %s, want 0", n)
		}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/log?follow=1", nil)
		req.SetBasicAuth("admin", "pw")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("follow: %v %v", resp, err)
		}
		if n := followers(); n != "1" {
			t.Errorf("during a follow: %s, want 1", n)
		}
		cancel()
		resp.Body.Close()
		deadline := time.Now().Add(3 * time.Second)
		for followers() != "0" {
			if time.Now().After(deadline) {
				t.Fatal("the follower gauge did not go back to 0 within 3 s of the client leaving")
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
