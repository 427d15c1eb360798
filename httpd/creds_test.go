package httpd

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/auth"
)

// TestLastAdminRace: the two admins of a users file demote each other at
// the same moment, ten times over: at most one of the two demotions may
// succeed, and an admin must be left each time. The rule is checked
// where the change is made, under the credential store's lock, not
// against the role each request had when it was authenticated.
func TestLastAdminRace(t *testing.T) {
	for trial := range 10 {
		e := newEnv(t, envOpts{})
		a, c := xhdr("admin", "admin-pass"), xhdr("colon", "pa:ss:word")
		// Both passwords in the verification cache: both requests pass
		// authentication at once.
		for _, h := range []map[string]string{a, c} {
			if r := e.req("GET", "/api/auth/check", h, ""); r.status != 200 {
				t.Fatalf("check: %d", r.status)
			}
			h["Content-Type"] = "application/json"
		}
		var wg sync.WaitGroup
		var st [2]int
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			st[0] = e.req("PATCH", "/api/auth/users", a, `{"name":"colon","role":"viewer"}`).status
		})
		wg.Go(func() {
			<-start
			st[1] = e.req("PATCH", "/api/auth/users", c, `{"name":"admin","role":"viewer"}`).status
		})
		close(start)
		wg.Wait()
		if st[0] == 200 && st[1] == 200 {
			t.Errorf("trial %d: both admins demoted each other", trial)
		}
		for _, s := range st {
			if s != 200 && s != 400 && s != 403 {
				t.Errorf("trial %d: a demotion answered %d, want 200, 400 or 403", trial, s)
			}
		}
		roles, _ := os.ReadFile(auth.RolesPath(e.users))
		if strings.Contains(string(roles), "admin:viewer") && strings.Contains(string(roles), "colon:viewer") {
			t.Errorf("trial %d: no admin left: %q", trial, roles)
		}
	}
}

// TestLastAdminRule: through the API, no change leaves the users file
// without an admin when it had one: demoting or removing the last admin
// is refused with 400 LastAdminError, whoever asks (kvmd answers an
// operation's error with 400, a busy device's with 409: htserver.py).
func TestLastAdminRule(t *testing.T) {
	e := newEnv(t, envOpts{})
	admin := xhdr("admin", "admin-pass")
	admin["Content-Type"] = "application/json"
	if r := e.req("PATCH", "/api/auth/users", admin, `{"name":"colon","role":"operator"}`); r.status != 200 {
		t.Fatalf("demote colon: %d %s", r.status, r.body)
	}
	// admin is the last admin now; a request from the unix socket (no
	// user of the file) may not take it either.
	for _, tc := range []struct{ method, path, body string }{
		{"PATCH", "/api/auth/users", `{"name":"admin","role":"viewer"}`},
		{"DELETE", "/api/auth/users?name=admin", ""},
	} {
		r := e.req(tc.method, tc.path, xhdr("colon", "pa:ss:word"), tc.body)
		if r.status != 403 {
			t.Errorf("%s %s by an operator: %d", tc.method, tc.path, r.status)
		}
	}
	e2 := newEnv(t, envOpts{peer: func(uid, gid uint32) (string, bool) { return "root", true }})
	h := map[string]string{"Content-Type": "application/json"}
	if r := e2.reqUnix("PATCH", "/api/auth/users", h, `{"name":"colon","role":"viewer"}`); r.status != 200 {
		t.Fatalf("demote colon: %d %s", r.status, r.body)
	}
	for _, tc := range []struct{ method, path, body string }{
		{"PATCH", "/api/auth/users", `{"name":"admin","role":"viewer"}`},
		{"DELETE", "/api/auth/users?name=admin", ""},
	} {
		r := e2.reqUnix(tc.method, tc.path, h, tc.body)
		if r.status != 400 || r.errName != "LastAdminError" || !strings.Contains(r.errMsg, "admin") {
			t.Errorf("%s %s of the last admin: %d %s", tc.method, tc.path, r.status, r.body)
		}
	}
	if r := e2.req("GET", "/api/auth/users", xhdr("admin", "admin-pass"), ""); r.status != 200 {
		t.Errorf("the last admin after the refusals: %d", r.status)
	}
}

// maxTokensPerUser is the cap README documents.
const maxTokensPerUser = 32

// TestTokenCap: a user has at most maxTokensPerUser API tokens; one more
// is a 400 TooManyTokensError that names the cap, and the tokens file is
// not written for it.
// Another user's tokens do not count.
func TestTokenCap(t *testing.T) {
	e := newEnv(t, envOpts{})
	admin := xhdr("admin", "admin-pass")
	for i := range maxTokensPerUser {
		e.mkToken(t, admin, fmt.Sprintf(`{"name":"t%d"}`, i))
	}
	before, err := os.ReadFile(auth.TokensPath(e.users))
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range admin {
		h[k] = v
	}
	r := e.req("POST", "/api/auth/tokens", h, `{"name":"one-more"}`)
	if r.status != 400 || r.errName != "TooManyTokensError" || !strings.Contains(r.errMsg, fmt.Sprint(maxTokensPerUser)) {
		t.Errorf("token %d: %d %s", maxTokensPerUser+1, r.status, r.body)
	}
	if after, _ := os.ReadFile(auth.TokensPath(e.users)); string(after) != string(before) {
		t.Error("the refused token changed the tokens file")
	}
	// Another user's count is its own; a revoked token frees a place.
	e.mkToken(t, admin, `{"name":"for-viewer","user":"viewer","role":"viewer"}`)
	if r := e.req("DELETE", "/api/auth/tokens?name=t0", admin, ""); r.status != 200 {
		t.Fatalf("revoke: %d", r.status)
	}
	e.mkToken(t, admin, `{"name":"one-more"}`)
	var v struct {
		Result struct{ Tokens []auth.TokenInfo } `json:"result"`
	}
	if r := e.req("GET", "/api/auth/tokens?user=admin", admin, ""); json.Unmarshal(r.body, &v) != nil || len(v.Result.Tokens) != maxTokensPerUser {
		t.Errorf("admin's tokens: %d, want %d", len(v.Result.Tokens), maxTokensPerUser)
	}
}

// openStreams opens a log follow and a WebSocket with hdr and returns a
// channel that gets a value as each of them ends.
func openStreams(t *testing.T, e *env, hdr map[string]string) <-chan string {
	t.Helper()
	ended := make(chan string, 2)
	resp := e.get(t, "/api/log?follow=1", hdr)
	if resp.StatusCode != 200 {
		t.Fatalf("follow: %d", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	go func() { io.Copy(io.Discard, br); resp.Body.Close(); ended <- "log follow" }()
	h := http.Header{}
	for k, v := range hdr {
		h.Set(k, v)
	}
	c := dialWS(t, e, "", h)
	readEvent(t, c)
	go func() {
		for {
			if _, _, err := c.Read(context.Background()); err != nil {
				ended <- "WebSocket"
				return
			}
		}
	}()
	return ended
}

// stillOpen fails if a stream ended (within a moment of real time).
func stillOpen(t *testing.T, ended <-chan string, when string) {
	t.Helper()
	select {
	case s := <-ended:
		t.Fatalf("%s: the %s ended", when, s)
	case <-time.After(50 * time.Millisecond):
	}
}

// bothEnd fails unless both streams end within a second of real time.
func bothEnd(t *testing.T, ended <-chan string, when string) {
	t.Helper()
	for range 2 {
		select {
		case <-ended:
		case <-time.After(time.Second):
			t.Fatalf("%s: a stream is still open", when)
		}
	}
}

// TestDeadlinesEndStreams: on a clock the test moves, the requests an
// API token or a session has open (a log follow, a WebSocket) are still
// open a nanosecond before its deadline, and end at it with no request
// made: the token's expiry, the session's idle timeout (moved by a
// use), its lifetime. The deadlines are timers, not checks at the next
// request.
func TestDeadlinesEndStreams(t *testing.T) {
	d, _ := testDevices(t)
	e := newEnv(t, envOpts{fakeClock: true, idle: 10 * time.Minute, lifetime: time.Hour, log: &fakeLog{}, devices: d})
	start := e.fake.Now()

	// A token that expires in 30 s (the file keeps whole seconds).
	expires := start.Add(30 * time.Second).Truncate(time.Second)
	var secret string
	err := e.store.Edit(nil, func(ed *auth.Edit) error {
		var err error
		secret, err = ed.AddToken(auth.TokenRequest{User: "viewer", Name: "soon", Expires: expires})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	ended := openStreams(t, e, bearer(secret))
	e.setNow(expires.Add(-time.Nanosecond))
	stillOpen(t, ended, "a nanosecond before the token's expiry")
	e.setNow(expires)
	bothEnd(t, ended, "at the token's expiry")
	if r := e.req("GET", "/api/auth/check", bearer(secret), ""); r.status != 403 {
		t.Errorf("the expired token: %d", r.status)
	}

	// A session idle for 10 min, used once 4 min in.
	t0 := e.fake.Now()
	tok := e.login("viewer", "viewer pass")
	ended = openStreams(t, e, cookie(tok))
	e.setNow(t0.Add(4 * time.Minute))
	if r := e.req("GET", "/api/auth/check", cookie(tok), ""); r.status != 200 {
		t.Fatalf("a use: %d", r.status)
	}
	e.setNow(t0.Add(10 * time.Minute))
	stillOpen(t, ended, "10 min after login, 6 after the last use")
	e.setNow(t0.Add(14*time.Minute - time.Nanosecond))
	stillOpen(t, ended, "a nanosecond before the idle timeout")
	e.setNow(t0.Add(14 * time.Minute))
	bothEnd(t, ended, "at the idle timeout")

	// A session used every 9 min ends at its lifetime all the same.
	t0 = e.fake.Now()
	tok = e.login("viewer", "viewer pass")
	ended = openStreams(t, e, cookie(tok))
	for at := 9 * time.Minute; at < time.Hour; at += 9 * time.Minute {
		e.setNow(t0.Add(at))
		if r := e.req("GET", "/api/auth/check", cookie(tok), ""); r.status != 200 {
			t.Fatalf("a use at +%s: %d", at, r.status)
		}
	}
	e.setNow(t0.Add(time.Hour - time.Nanosecond))
	stillOpen(t, ended, "a nanosecond before the lifetime")
	e.setNow(t0.Add(time.Hour))
	bothEnd(t, ended, "at the lifetime")
}

// TestRecreatedUserInheritsNothing: a token and a role line a removed
// user left behind (an editor removed the entry alone) do not pass to the
// next user of the name made through the API.
func TestRecreatedUserInheritsNothing(t *testing.T) {
	e := newEnv(t, envOpts{})
	f, _ := auth.ParseTokens(nil)
	secret, err := f.Add("ghost", "old", auth.RoleAdmin, time.Time{}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(auth.TokensPath(e.users), f.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	writeRoles(t, e, testRoles+"ghost:admin\n")
	if r := e.req("GET", "/api/auth/check", bearer(secret), ""); r.status != 403 {
		t.Fatalf("the token of a user not in the file: %d", r.status)
	}
	admin := xhdr("admin", "admin-pass")
	admin["Content-Type"] = "application/json"
	if r := e.req("POST", "/api/auth/users", admin, `{"name":"ghost","passwd":"ghost-pass","role":"viewer"}`); r.status != 200 {
		t.Fatalf("add ghost: %d %s", r.status, r.body)
	}
	if r := e.req("GET", "/api/auth/check", bearer(secret), ""); r.status != 403 {
		t.Errorf("the old ghost's token lets the new ghost in: %d", r.status)
	}
	if data, _ := os.ReadFile(auth.TokensPath(e.users)); strings.Contains(string(data), "ghost:") {
		t.Errorf("the old ghost's token is still in the file: %q", data)
	}
}

// TestTokenForNoUser: an admin cannot make a token for a name that is not
// in the users file (404): it would let in whoever gets the name next.
func TestTokenForNoUser(t *testing.T) {
	e := newEnv(t, envOpts{})
	h := xhdr("admin", "admin-pass")
	h["Content-Type"] = "application/json"
	if r := e.req("POST", "/api/auth/tokens", h, `{"name":"x","user":"nobody"}`); r.status != 404 {
		t.Errorf("a token for nobody: %d %s", r.status, r.body)
	}
	if data, _ := os.ReadFile(auth.TokensPath(e.users)); strings.Contains(string(data), "nobody") {
		t.Errorf("the tokens file names nobody: %q", data)
	}
}
