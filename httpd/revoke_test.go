package httpd

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/auth/ldapauth/ldaptest"
)

// TestPasswordStreamsEnd: a WebSocket and a log follow opened with an
// operator's password (X-KVMD headers or Basic) end when the user is
// removed, given a lower role or a new password, through the API or in
// the files (as kvmd user del/set writes them), as a session's do; and
// from the moment of the change the WebSocket's input reaches the host no
// more, before the socket has closed. Before the fix only sessions and
// API tokens carried their end: the operator kept typing on the host
// after DELETE /api/auth/users answered 200.
func TestPasswordStreamsEnd(t *testing.T) {
	f := &fakeLog{}
	h, host := testHID(t)
	d, _ := testDevices(t)
	d.HID = h
	e := newEnv(t, envOpts{devices: d, log: f})
	he := &hidEnv{env: e, host: host, hid: h}
	admin := xhdr("admin", "admin-pass")
	admin["Content-Type"] = "application/json"
	api := func(method, path, body string) func() {
		return func() {
			if r := e.req(method, path, admin, body); r.status != 200 {
				t.Fatalf("%s %s: %d %s", method, path, r.status, r.body)
			}
		}
	}
	without := func(user string) map[string]string {
		m := map[string]string{}
		for u, p := range testUsers {
			if u != user {
				m[u] = p
			}
		}
		return m
	}
	ways := []struct {
		name   string
		change func()
		viaAPI bool
	}{
		{"DELETE /api/auth/users", api("DELETE", "/api/auth/users?name=operator", ""), true},
		{"PATCH a lower role", api("PATCH", "/api/auth/users", `{"name":"operator","role":"viewer"}`), true},
		{"PATCH a new password", api("PATCH", "/api/auth/users", `{"name":"operator","passwd":"operator-pass-2"}`), true},
		{"the users file without the user", func() { writeUsers(t, e.users, without("operator")) }, false},
		{"the users file with a new password", func() {
			m := without("operator")
			m["operator"] = "operator-pass-3"
			writeUsers(t, e.users, m)
		}, false},
		{"the roles file with a lower role", func() { writeRoles(t, e, "viewer:viewer\noperator:viewer\n") }, false},
	}
	creds := []struct {
		name string
		hdr  map[string]string
	}{
		{"X-KVMD", xhdr("operator", "operator-pass")},
		{"Basic", map[string]string{"Authorization": basic("operator", "operator-pass")}},
	}
	for _, way := range ways {
		for _, cred := range creds {
			t.Run(way.name+"/"+cred.name, func(t *testing.T) {
				writeUsers(t, e.users, testUsers)
				writeRoles(t, e, testRoles)
				eventually(t, "the operator back", func() bool {
					return e.req("POST", "/api/hid/events/send_key?key=Escape", cred.hdr, "").status == 200
				})
				he.keys()
				hdr := http.Header{}
				for k, v := range cred.hdr {
					hdr.Set(k, v)
				}
				c := dialWS(t, e, "?stream=0", hdr)
				readEvent(t, c)
				closed := make(chan struct{})
				go func() {
					defer close(closed)
					for {
						if _, _, err := c.Read(context.Background()); err != nil {
							return
						}
					}
				}()
				key := func(name string) {
					ctx, cancel := context.WithTimeout(context.Background(), time.Second)
					defer cancel()
					c.Write(ctx, websocket.MessageText, []byte(`{"event_type":"key","event":{"key":"`+name+`","state":true,"finish":true}}`))
				}
				key("KeyA")
				if got := he.keys(); got != "[KeyA] []" {
					t.Fatalf("the operator's key before the change: %q", got)
				}
				followUntilEnd(t, e, f, cred.hdr, func() {
					way.change()
					if way.viaAPI {
						// The change answered 200: from now on nothing
						// of this socket's reaches the host.
						key("KeyB")
					}
				})
				select {
				case <-closed:
				case <-time.After(time.Second):
					t.Fatal("the WebSocket was still open a second after the change")
				}
				if got := he.keys(); got != "" {
					t.Errorf("the host got %q after the change", got)
				}
			})
		}
	}
	// A change to another user ends nothing of this one's.
	writeUsers(t, e.users, testUsers)
	writeRoles(t, e, testRoles)
	eventually(t, "the operator back", func() bool {
		return e.req("POST", "/api/hid/events/send_key?key=Escape", xhdr("operator", "operator-pass"), "").status == 200
	})
	c := dialWS(t, e, "?stream=0", http.Header{"X-Kvmd-User": {"operator"}, "X-Kvmd-Passwd": {"operator-pass"}})
	readEvent(t, c)
	api("PATCH", "/api/auth/users", `{"name":"viewer","passwd":"viewer pass 2"}`)()
	api("PATCH", "/api/auth/users", `{"name":"viewer","role":"operator"}`)()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	for {
		if _, _, err := c.Read(ctx); err != nil {
			if ctx.Err() == nil {
				t.Fatalf("another user's change ended this user's WebSocket: %v", err)
			}
			break
		}
	}
}

// TestExternalStreamsEnd: with the real slapd behind the LDAP backend, a
// WebSocket and a log follow opened with an LDAP user's password end once
// the directory no longer takes the password, or gives the user another
// role, within the cache's TTL and one more (the request asks again when
// the cached answer lapses, as a new request would); a change elsewhere
// (another user's password) ends nothing. Before the fix they lived on.
func TestExternalStreamsEnd(t *testing.T) {
	const ttl = time.Second
	s, ext := ldapRoles(t, ttl)
	e := newEnv(t, envOpts{external: ext, log: &fakeLog{}, devices: func() *Devices { d, _ := testDevices(t); return d }()})
	bob := map[string]string{"Authorization": basic(ldaptest.Bob.Name, ldaptest.Bob.Password)}
	for _, tc := range []struct {
		name            string
		change, restore func()
	}{
		{"another password in the directory",
			func() { s.SetPassword(t, ldaptest.Bob, "bob-other") },
			func() { s.SetPassword(t, ldaptest.Bob, ldaptest.Bob.Password) }},
		{"another role group",
			func() {
				s.Modify(t, ldaptest.UniqueGroup, "uniqueMember", ldaptest.BaseDN)
				s.Modify(t, ldaptest.Bob.DN, "memberOf", ldaptest.MemberOfGroup)
			},
			func() {
				s.Modify(t, ldaptest.UniqueGroup, "uniqueMember", ldaptest.Bob.DN)
				s.Modify(t, ldaptest.Bob.DN, "memberOf")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ended := openStreams(t, e, bob)
			s.SetPassword(t, ldaptest.Carol, "carol-other") // another user's
			defer s.SetPassword(t, ldaptest.Carol, ldaptest.Carol.Password)
			select {
			case what := <-ended:
				t.Fatalf("the %s ended when another user changed", what)
			case <-time.After(2*ttl + 500*time.Millisecond):
			}
			tc.change()
			defer tc.restore()
			start := time.Now()
			for range 2 {
				select {
				case what := <-ended:
					t.Logf("the %s ended %s after the change", what, time.Since(start).Round(time.Millisecond))
				case <-time.After(2*ttl + 2*time.Second - time.Since(start)):
					t.Fatal("a stream was still open after twice the cache's TTL")
				}
			}
		})
	}
	if !strings.Contains(e.logs.String(), `msg="request ended: its credentials changed" user=bob`) {
		t.Errorf("no log line says why the streams ended")
	}
}
