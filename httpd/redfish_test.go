package httpd

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"kvmd/atx"
	"kvmd/msd"
	"kvmd/redfish"
)

// redfishATX is an ATX board that is on and records its presses.
type redfishATX struct{ presses chan string }

func (a redfishATX) State() atx.State {
	var st atx.State
	st.Enabled, st.Leds.Power = true, true
	return st
}

func (a redfishATX) Power(_ context.Context, action string, _ bool) error {
	a.presses <- action
	return nil
}

func (a redfishATX) Click(_ context.Context, button string, _ bool) error {
	a.presses <- button
	return nil
}

// rfReply is a Redfish answer: its status and the error's MessageId, or
// its body.
type rfReply struct {
	status int
	header http.Header
	id     string
	body   map[string]any
}

func (e *env) redfish(method, path string, hdr map[string]string, body string) rfReply {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.base+path, rd)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := rfReply{status: resp.StatusCode, header: resp.Header}
	if len(b) == 0 {
		return r
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
		e.t.Fatalf("%s %s: Content-Type %q: %s", method, path, ct, b)
	}
	var eb struct {
		Error struct {
			Info []struct {
				MessageID string `json:"MessageId"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &eb); err == nil && len(eb.Error.Info) == 1 {
		r.id = strings.TrimPrefix(eb.Error.Info[0].MessageID, redfish.Registry+".")
		return r
	}
	if err := json.Unmarshal(b, &r.body); err != nil {
		e.t.Fatalf("%s %s: not JSON: %s", method, path, b)
	}
	return r
}

// TestRedfishRoutes: the Redfish rows of the route table, served at
// /redfish with the API's authentication and the roles of the matching API
// routes, answer every error of the wrapper in Redfish's error format:
// no credentials and wrong ones are 401 (the API's wrong password is 403
// ForbiddenError), a role too low 403, an unknown path 404, a method 405
// with Allow, a body too large 413. A trailing slash is the same resource;
// a session's id is the last element of its path. A session made through
// the session service is the daemon's: its X-Auth-Token lets in, GET
// /api/auth/sessions lists it, and its DELETE ends it.
func TestRedfishRoutes(t *testing.T) {
	a := redfishATX{presses: make(chan string, 10)}
	e := newEnv(t, envOpts{devices: &Devices{ATX: a},
		redfish: &redfish.Config{Power: redfish.ATX{C: a}, SessionTimeout: 60}})
	basicHdr := func(user, pass string) map[string]string {
		return map[string]string{"Authorization": basic(user, pass)}
	}
	for _, tt := range []struct {
		method, path string
		hdr          map[string]string
		body         string
		status       int
		id           string
	}{
		{"GET", "/redfish", nil, "", 200, ""},
		{"GET", "/redfish/v1", nil, "", 200, ""},
		{"GET", "/redfish/v1/", nil, "", 200, ""},
		{"GET", "/redfish/v1/Systems", nil, "", 401, "NoValidSession"},
		{"GET", "/redfish/v1/Systems", basicHdr("viewer", "wrong"), "", 401, "NoValidSession"},
		{"GET", "/redfish/v1/Systems/", basicHdr("viewer", "viewer pass"), "", 200, ""},
		{"GET", "/redfish/v1/Systems/0", viewerHdr, "", 200, ""},
		{"POST", "/redfish/v1/Systems/0/Actions/ComputerSystem.Reset", basicHdr("viewer", "viewer pass"), `{"ResetType":"On"}`, 403, "InsufficientPrivilege"},
		{"POST", "/redfish/v1/Systems/0/Actions/ComputerSystem.Reset", basicHdr("operator", "operator-pass"), `{"ResetType":"ForceOff"}`, 204, ""},
		{"POST", "/redfish/v1/Systems/0/Actions/ComputerSystem.Reset", operatorHdr, `{"ResetType":"Nmi"}`, 400, "ActionParameterValueNotInList"},
		{"POST", "/redfish/v1/Systems/0/Actions/ComputerSystem.Reset", operatorHdr, `{"ResetType":"` + strings.Repeat("x", 5000) + `"}`, 413, "PayloadTooLarge"},
		{"DELETE", "/redfish/v1/Systems/0", adminHdr, "", 405, "OperationNotAllowed"},
		{"GET", "/redfish/v1/Chassis", adminHdr, "", 404, "ResourceNotFound"},
		{"GET", "/redfish/v1/Systems/1", adminHdr, "", 404, "ResourceNotFound"},
		{"GET", "/redfish/v1/SessionService/Sessions/nope", adminHdr, "", 404, "ResourceNotFound"},
		{"GET", "/redfish/v1/SessionService/Sessions/nope/more", adminHdr, "", 404, "ResourceNotFound"},
		{"GET", "/redfish/v1/Managers/BMC/VirtualMedia/MSD", adminHdr, "", 404, "ResourceNotFound"},
		{"GET", "/redfish/v1/Systems", map[string]string{"X-Auth-Token": "not-a-token"}, "", 400, "GeneralError"},
		{"GET", "/redfish/v1/Systems", map[string]string{"X-Auth-Token": strings.Repeat("ab", 32)}, "", 401, "NoValidSession"},
	} {
		r := e.redfish(tt.method, tt.path, tt.hdr, tt.body)
		if r.status != tt.status || r.id != tt.id {
			t.Errorf("%s %s: %d %q, want %d %q", tt.method, tt.path, r.status, r.id, tt.status, tt.id)
		}
		if tt.status == 405 && r.header.Get("Allow") != "GET, HEAD, PATCH" {
			t.Errorf("Allow %q", r.header.Get("Allow"))
		}
	}
	select {
	case p := <-a.presses:
		if p != atx.ActionOffHard {
			t.Errorf("ForceOff pressed %q", p)
		}
	case <-time.After(time.Second):
		t.Error("ForceOff pressed nothing")
	}
	if r := e.req("GET", "/api/redfish/v1/Systems", adminHdr, ""); r.status != 404 || r.errName != "NotFoundError" {
		t.Errorf("/api/redfish is not served: %d %s", r.status, r.errName)
	}

	// A session of the session service is the daemon's.
	r := e.redfish("POST", "/redfish/v1/SessionService/Sessions", nil, `{"UserName":"operator","Password":"operator-pass"}`)
	token, loc := r.header.Get("X-Auth-Token"), r.header.Get("Location")
	if r.status != 201 || len(token) != 64 || !strings.HasPrefix(loc, "/redfish/v1/SessionService/Sessions/") {
		t.Fatalf("login: %d %v %v", r.status, r.header, r.body)
	}
	xauth := map[string]string{"X-Auth-Token": token}
	if r := e.redfish("GET", loc, xauth, ""); r.status != 200 || r.body["UserName"] != "operator" {
		t.Errorf("GET its session: %d %v", r.status, r.body)
	}
	if r := e.redfish("GET", loc+"/", xauth, ""); r.status != 200 {
		t.Errorf("GET its session/: %d", r.status)
	}
	if r := e.redfish("POST", "/redfish/v1/Systems/0/Actions/ComputerSystem.Reset", xauth, `{"ResetType":"PushPowerButton"}`); r.status != 204 {
		t.Errorf("reset with X-Auth-Token: %d %s", r.status, r.id)
	}
	if got := e.req("GET", "/api/auth/sessions", xauth, ""); got.status != 200 || !strings.Contains(string(got.body), `"user":"operator"`) {
		t.Errorf("/api/auth/sessions with X-Auth-Token: %d %s", got.status, got.body)
	}
	if r := e.redfish("DELETE", loc, basicHdr("viewer", "viewer pass"), ""); r.status != 404 {
		t.Errorf("a viewer ends the operator's session: %d", r.status)
	}
	if r := e.redfish("DELETE", loc, xauth, ""); r.status != 204 {
		t.Errorf("logout: %d %s", r.status, r.id)
	}
	if r := e.redfish("GET", "/redfish/v1/Systems", xauth, ""); r.status != 401 || r.id != "NoValidSession" {
		t.Errorf("the ended session's token: %d %s", r.status, r.id)
	}
	if r := e.redfish("POST", "/redfish/v1/SessionService/Sessions", nil, `{"UserName":"operator","Password":"wrong"}`); r.status != 401 || r.id != "NoValidSession" {
		t.Errorf("a wrong password's login: %d %s", r.status, r.id)
	}
}

// TestDownloadsEndWithTheirSession: a download of write_remote, and one of
// Redfish's InsertMedia, ends when the session it came with does (here a
// logout through the Redfish session's DELETE, and one through
// /api/auth/sessions): the answer says so at once and nothing is kept.
func TestDownloadsEndWithTheirSession(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1000000")
		w.Write(make([]byte, 1000))
		w.(http.Flusher).Flush()
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	defer files.Close()
	e := newMSDEnv(t, envOpts{redfish: &redfish.Config{Remote: msd.FetchOptions{Timeout: 5 * time.Second}}}, 0, nil)
	uploading := func() bool {
		st := e.m.State()
		return st.Storage != nil && st.Storage.Uploading != nil && st.Storage.Uploading.Written > 0
	}

	// Redfish: InsertMedia with a session's X-Auth-Token, the session
	// then ended by the DELETE of its resource.
	r := e.redfish("POST", "/redfish/v1/SessionService/Sessions", nil, `{"UserName":"operator","Password":"operator-pass"}`)
	xauth := map[string]string{"X-Auth-Token": r.header.Get("X-Auth-Token")}
	done := make(chan rfReply, 1)
	go func() {
		done <- e.redfish("POST", redfish.InsertPath, xauth, `{"Image":"`+files.URL+`/slow.iso"}`)
	}()
	eventually(t, "the download begun", uploading)
	start := time.Now()
	if r := e.redfish("DELETE", r.header.Get("Location"), map[string]string{"Authorization": basic("admin", "admin-pass")}, ""); r.status != 204 {
		t.Fatalf("DELETE the session: %d %s", r.status, r.id)
	}
	select {
	case r := <-done:
		if r.status != 400 || r.id != "GeneralError" {
			t.Errorf("InsertMedia after its session ended: %d %s", r.status, r.id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("InsertMedia goes on after its session ended")
	}
	t.Logf("InsertMedia ended %v after its session", time.Since(start).Round(time.Millisecond))

	// write_remote with a session cookie, the session ended through the
	// API.
	tok := e.login("operator", "operator-pass")
	lines := make(chan []string, 1)
	go func() {
		req, _ := http.NewRequest("POST", e.base+"/api/msd/write_remote?url="+files.URL+"/slow2.iso", nil)
		req.Header.Set("Cookie", "auth_token="+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			lines <- []string{err.Error()}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lines <- strings.Split(strings.TrimSpace(string(b)), "\r\n")
	}()
	eventually(t, "the download begun", uploading)
	if r := e.req("DELETE", "/api/auth/sessions?user=operator", adminHdr, ""); r.status != 200 {
		t.Fatalf("ending the operator's sessions: %d %s", r.status, r.body)
	}
	select {
	case l := <-lines:
		if last := l[len(l)-1]; !strings.Contains(last, `"ok":false`) || !strings.Contains(last, "was stopped") {
			t.Errorf("write_remote's last line: %q", l)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("write_remote goes on after its session ended")
	}
	if got := e.files(); len(got) != 0 {
		t.Errorf("storage holds %q", got)
	}
}
