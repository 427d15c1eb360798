package main

import (
	"bufio"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"

	"kvmd/journal/journaltest"
)

func getLog(t *testing.T, url, user, passwd string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth(user, passwd)
	return http.DefaultClient.Do(req)
}

// TestLogEndToEnd reads real journal files through the real binary.
func TestLogEndToEnd(t *testing.T) {
	journaltest.Require(t)
	users := usersFile(t, "admin", "pw")
	dir := t.TempDir()
	now := time.Now()
	w := journaltest.Start(t, dir, "system")
	w.Append(
		journaltest.Entry{Time: now.Add(-2 * time.Hour), Unit: "kvmd.service", Message: "two hours ago"},
		journaltest.Entry{Time: now.Add(-30 * time.Second), Unit: "kvmd-otg.service", Message: "half a minute ago  "},
		journaltest.Entry{Time: now.Add(-20 * time.Second), Unit: "sshd.service", Message: "not ours"},
	)
	w.Sync()
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, []string{"TZ=UTC"}, nil, "serve", "--users", users, "--listen", addr, "--journal-dir", dir, "--access-log=false")
	d.stderr.wait(t, `kvmd listening`)
	base := "http://" + addr + "/api/log"

	body := func(q string) string {
		resp, err := getLog(t, base+q, "admin", "pw")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
			t.Fatalf("%s: %d %q %s", q, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		return string(b)
	}
	stamp := func(at time.Time) string { return at.UTC().Format("2006-01-02 15:04:05") }
	want := "[" + stamp(now.Add(-2*time.Hour)) + " kvmd.service] --- two hours ago\r\n" +
		"[" + stamp(now.Add(-30*time.Second)) + " kvmd-otg.service] --- half a minute ago\r\n"
	if got := body(""); got != want {
		t.Errorf("whole boot:\n%q\nwant\n%q", got, want)
	}
	if got := body("?seek=60"); got != want[strings.Index(want, "\r\n")+2:] {
		t.Errorf("seek=60:\n%q", got)
	}

	// Follow: an entry written now reaches the client.
	resp, err := getLog(t, base+"?follow=1&seek=60", "admin", "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if l, _ := br.ReadString('\n'); !strings.Contains(l, "half a minute ago") {
		t.Fatalf("follow began with %q", l)
	}
	start := time.Now()
	w.Append(journaltest.Entry{Unit: "kvmd.service", Message: "written while following"})
	got := make(chan string, 1)
	go func() { l, _ := br.ReadString('\n'); got <- l }()
	select {
	case l := <-got:
		if !strings.HasSuffix(l, "kvmd.service] --- written while following\r\n") {
			t.Errorf("followed line %q", l)
		}
		t.Logf("follow latency through the binary: %s", time.Since(start))
	case <-time.After(2 * time.Second):
		t.Fatal("an appended entry did not reach the follower within 2 s")
	}

	// No journal there: 503 with the reason, in the envelope.
	addr2 := testutil.FreeAddr(t)
	d2 := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr2, "--journal-dir", filepath.Join(dir, "nope"))
	d2.stderr.wait(t, `kvmd listening`)
	resp2, err := getLog(t, "http://"+addr2+"/api/log", "admin", "pw")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 503 || !strings.Contains(string(b), `"UnavailableError"`) || !strings.Contains(string(b), "journal cannot be read") {
		t.Errorf("missing journal dir: %d %s", resp2.StatusCode, b)
	}
}

// TestDemoLog: the demo ships a journal, and the daemon's own lines are
// appended to it, so a follow shows requests as they happen.
func TestDemoLog(t *testing.T) {
	journaltest.Require(t)
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--demo", "--listen", addr)
	passwd := d.stdout.wait(t, `user admin, password (\S+)`)
	d.stderr.wait(t, `kvmd listening`)
	resp, err := getLog(t, "http://"+addr+"/api/log?follow=1", "admin", passwd)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	seen := map[string]bool{}
	deadline := time.After(5 * time.Second)
	for !(seen["unicode"] && seen["request"]) {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("follow ended")
			}
			switch {
			case strings.Contains(l, "sshd") || strings.Contains(l, "v0.9"):
				t.Errorf("another unit's or the previous boot's line: %q", l)
			case strings.Contains(l, "Zürich → 東京 ✓"):
				seen["unicode"] = true
				// A request made now shows in the follow.
				go getLog(t, "http://"+addr+"/api/auth/check", "admin", passwd)
			case strings.Contains(l, "path=/api/auth/check"):
				seen["request"] = true
			}
		case <-deadline:
			t.Fatalf("demo follow: saw %v", seen)
		}
	}
}
