package redfish

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/atx"
	"kvmd/auth"
	"kvmd/msd"
	"kvmd/msd/msdtest"
)

// fakeATX is an ATX board whose power LED the test sets; it records the
// actions asked of it.
type fakeATX struct {
	mu      sync.Mutex
	enabled bool
	on      bool
	busy    bool
	did     []string
}

func (f *fakeATX) State() atx.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	var st atx.State
	st.Enabled, st.Leds.Power = f.enabled, f.on
	return st
}

func (f *fakeATX) Power(_ context.Context, action string, wait bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.busy {
		return atx.ErrBusy
	}
	f.did = append(f.did, "power:"+action+":"+strconv.FormatBool(wait))
	return nil
}

func (f *fakeATX) Click(_ context.Context, button string, wait bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.did = append(f.did, "click:"+button+":"+strconv.FormatBool(wait))
	return nil
}

// fakeSessions is a session store of one user, "op".
type fakeSessions struct {
	mu    sync.Mutex
	next  int
	live  map[string]auth.SessionInfo // by id
	ended []string
}

func (f *fakeSessions) Login(_ context.Context, user, passwd string, _ netip.Addr) (string, string, error) {
	if user != "op" || passwd != "pw" {
		return "", "", auth.ErrForbidden
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next++
	id := "s" + strconv.Itoa(f.next)
	f.live[id] = auth.SessionInfo{ID: id, User: user, Created: time.Unix(1e9, 0)}
	return strings.Repeat("a", 63) + strconv.Itoa(f.next%10), id, nil
}

func (f *fakeSessions) List(user string) []auth.SessionInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []auth.SessionInfo
	for _, si := range f.live {
		if user == "" || si.User == user {
			out = append(out, si)
		}
	}
	slices.SortFunc(out, func(a, b auth.SessionInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

func (f *fakeSessions) End(id, owner string, _ Caller) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	si, ok := f.live[id]
	if !ok || (owner != "" && si.User != owner) {
		return false
	}
	delete(f.live, id)
	f.ended = append(f.ended, id)
	return true
}

// testRoutes route the tests' requests as httpd's table does (without
// its authentication: the caller is the test's).
var testRoutes = []struct {
	method, path string
	h            Handler
}{
	{"GET", "/redfish", (*Service).Versions},
	{"GET", Root, (*Service).Root},
	{"GET", SystemsPath, (*Service).Systems},
	{"GET", SystemPath, (*Service).System},
	{"PATCH", SystemPath, (*Service).PatchSystem},
	{"POST", ResetPath, (*Service).Reset},
	{"POST", BootOrderPath, (*Service).SetDefaultBootOrder},
	{"GET", ManagersPath, (*Service).Managers},
	{"GET", ManagerPath, (*Service).Manager},
	{"GET", VirtualMediaPath, (*Service).VirtualMediaCollection},
	{"GET", MediaPath, (*Service).VirtualMedia},
	{"POST", InsertPath, (*Service).InsertMedia},
	{"POST", EjectPath, (*Service).EjectMedia},
	{"GET", SessionService, (*Service).SessionServiceRes},
	{"GET", SessionsPath, (*Service).Sessions},
	{"POST", SessionsPath, (*Service).CreateSession},
	{"GET", SessionMemberPath, (*Service).Session},
	{"DELETE", SessionMemberPath, (*Service).DeleteSession},
}

type env struct {
	atx      *fakeATX
	sessions *fakeSessions
	media    *msd.Manager
	drive    *msdtest.Drive
	dir      string
	srv      *httptest.Server
	svc      *Service
	caller   Caller
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{atx: &fakeATX{enabled: true}, sessions: &fakeSessions{live: map[string]auth.SessionInfo{}},
		drive: &msdtest.Drive{}, dir: t.TempDir(), caller: Caller{User: "op", Role: auth.RoleOperator}}
	for name, size := range map[string]int{"boot.iso": msd.MinCDROMSize, "disk.img": 1 << 20} {
		if err := os.WriteFile(filepath.Join(e.dir, name), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	e.media, err = msd.New(msd.Config{Dir: e.dir, Drive: e.drive})
	if err != nil {
		t.Fatal(err)
	}
	e.svc = New(Config{Power: ATX{e.atx}, Media: e.media, Sessions: e.sessions, SessionTimeout: 3600, Version: "1.2.3",
		HostName: func() string { return "my host!" }, Caller: func(context.Context) Caller { return e.caller },
		Remote: msd.FetchOptions{Timeout: 5 * time.Second, Stall: time.Second}})
	mux := http.NewServeMux()
	for _, rt := range testRoutes {
		mux.HandleFunc(rt.method+" "+rt.path, func(w http.ResponseWriter, r *http.Request) {
			if err := rt.h(e.svc, w, r); err != nil {
				var re *Error
				if !errors.As(err, &re) {
					t.Errorf("%s %s: not a Redfish error: %v", r.Method, r.URL.Path, err)
					re = FromStatus(500, err.Error())
				}
				WriteError(w, re)
			}
		})
	}
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (e *env) do(t *testing.T, method, path, body string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &a.body); err != nil {
			t.Fatalf("%s %s: not JSON: %s", method, path, b)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("%s %s: Content-Type %q", method, path, ct)
		}
	}
	return a
}

// errID is the MessageId of a Redfish error answer; it fails t when the
// answer is not one (DSP0266: error.code, error.message and
// @Message.ExtendedInfo with MessageId and Message).
func (a answer) errID(t *testing.T) string {
	t.Helper()
	var b errorBody
	if err := json.Unmarshal([]byte(a.raw), &b); err != nil || b.Error.Code == "" || b.Error.Message == "" ||
		len(b.Error.ExtendedInfo) != 1 || b.Error.ExtendedInfo[0].Message == "" || b.Error.ExtendedInfo[0].MessageArgs == nil {
		t.Fatalf("not a Redfish error: %d %s", a.status, a.raw)
	}
	return strings.TrimPrefix(b.Error.ExtendedInfo[0].MessageID, Registry+".")
}

func get[T any](t *testing.T, m map[string]any, path ...string) T {
	t.Helper()
	var v any = m
	for _, p := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("%v: no %s in %v", path, p, v)
		}
		v = mm[p]
	}
	out, ok := v.(T)
	if !ok {
		t.Fatalf("%v: %v (%T)", path, v, v)
	}
	return out
}

func TestRootAndCollections(t *testing.T) {
	e := newEnv(t)
	if a := e.do(t, "GET", "/redfish", ""); a.status != 200 || a.body["v1"] != "/redfish/v1/" {
		t.Errorf("versions: %d %s", a.status, a.raw)
	}
	a := e.do(t, "GET", Root, "")
	if a.status != 200 || get[string](t, a.body, "Systems", "@odata.id") != SystemsPath ||
		get[string](t, a.body, "Managers", "@odata.id") != ManagersPath ||
		get[string](t, a.body, "Links", "Sessions", "@odata.id") != SessionsPath ||
		get[string](t, a.body, "SessionService", "@odata.id") != SessionService || a.header.Get("OData-Version") != "4.0" {
		t.Errorf("root: %d %s", a.status, a.raw)
	}
	for path, want := range map[string]string{SystemsPath: SystemPath, ManagersPath: ManagerPath, VirtualMediaPath: MediaPath} {
		a := e.do(t, "GET", path, "")
		members := get[[]any](t, a.body, "Members")
		if len(members) != 1 || members[0].(map[string]any)["@odata.id"] != want || a.body["Members@odata.count"] != 1.0 {
			t.Errorf("%s: %s", path, a.raw)
		}
	}
	a = e.do(t, "GET", SystemPath, "")
	if a.body["PowerState"] != "Off" || a.body["HostName"] != "my_host_" ||
		get[string](t, a.body, "Actions", "#ComputerSystem.Reset", "target") != ResetPath ||
		len(get[[]any](t, a.body, "Actions", "#ComputerSystem.Reset", "ResetType@Redfish.AllowableValues")) != 6 ||
		get[[]any](t, a.body, "Links", "ManagedBy")[0].(map[string]any)["@odata.id"] != ManagerPath {
		t.Errorf("system: %s", a.raw)
	}
	e.atx.mu.Lock()
	e.atx.on = true
	e.atx.mu.Unlock()
	if a := e.do(t, "GET", SystemPath, ""); a.body["PowerState"] != "On" {
		t.Errorf("power LED on: %s", a.raw)
	}
	if a := e.do(t, "GET", ManagerPath, ""); a.body["FirmwareVersion"] != "1.2.3" || get[string](t, a.body, "VirtualMedia", "@odata.id") != VirtualMediaPath {
		t.Errorf("manager: %s", a.raw)
	}

	// Without ATX wiring there is no system; without an MSD no medium.
	e.atx.mu.Lock()
	e.atx.enabled = false
	e.atx.mu.Unlock()
	e.svc.cfg.Media = nil
	if a := e.do(t, "GET", SystemsPath, ""); a.body["Members@odata.count"] != 0.0 {
		t.Errorf("systems without ATX: %s", a.raw)
	}
	for _, p := range []string{SystemPath, MediaPath} {
		if a := e.do(t, "GET", p, ""); a.status != 404 || a.errID(t) != "ResourceNotFound" {
			t.Errorf("%s: %d %s", p, a.status, a.raw)
		}
	}
	if a := e.do(t, "POST", ResetPath, `{"ResetType":"On"}`); a.status != 404 {
		t.Errorf("reset without ATX: %d %s", a.status, a.raw)
	}
}

func TestReset(t *testing.T) {
	e := newEnv(t)
	for _, rt := range ResetTypes {
		if a := e.do(t, "POST", ResetPath, `{"ResetType":"`+rt+`"}`); a.status != 204 || a.raw != "" {
			t.Errorf("%s: %d %s", rt, a.status, a.raw)
		}
	}
	want := []string{"power:on:false", "power:off_hard:false", "power:off:false", "power:reset_hard:false", "power:on:false", "click:power:false"}
	if !slices.Equal(e.atx.did, want) {
		t.Errorf("ATX actions %q, want %q", e.atx.did, want)
	}
	for _, tt := range []struct {
		body, id string
		status   int
	}{
		{`{}`, "ActionParameterMissing", 400},
		{`{"ResetType":null}`, "ActionParameterMissing", 400},
		{`{"ResetType":"Nmi"}`, "ActionParameterValueNotInList", 400},
		{`{"ResetType":"on"}`, "ActionParameterValueNotInList", 400},
		{`{"ResetType":1}`, "ActionParameterValueTypeError", 400},
		{`{"ResetType":"On","Extra":1}`, "ActionParameterUnknown", 400},
		{`[]`, "MalformedJSON", 400},
		{`{"ResetType":`, "MalformedJSON", 400},
		{`null`, "MalformedJSON", 400},
		{`"On"`, "MalformedJSON", 400},
		{strings.Repeat(" ", maxBody+1), "PayloadTooLarge", 413},
	} {
		if a := e.do(t, "POST", ResetPath, tt.body); a.status != tt.status || a.errID(t) != tt.id {
			t.Errorf("%.40q: %d %s, want %d %s", tt.body, a.status, a.raw, tt.status, tt.id)
		}
	}
	e.atx.busy = true
	if a := e.do(t, "POST", ResetPath, `{"ResetType":"ForceOff"}`); a.status != 409 || a.errID(t) != "ResourceInUse" {
		t.Errorf("busy: %d %s", a.status, a.raw)
	}
	// kvmd's PATCH for the OKD installer, and its boot order action.
	for _, p := range []struct{ method, path string }{{"PATCH", SystemPath}, {"POST", BootOrderPath}} {
		if a := e.do(t, p.method, p.path, `{"Boot":{"BootSourceOverrideTarget":"Cd","BootSourceOverrideEnabled":"Once"}}`); a.status != 204 {
			t.Errorf("%s %s: %d %s", p.method, p.path, a.status, a.raw)
		}
		if a := e.do(t, p.method, p.path, `{"Boot":`); a.status != 400 || a.errID(t) != "MalformedJSON" {
			t.Errorf("%s %s, malformed: %d %s", p.method, p.path, a.status, a.raw)
		}
	}
}

func TestVirtualMedia(t *testing.T) {
	e := newEnv(t)
	a := e.do(t, "GET", MediaPath, "")
	if a.body["Inserted"] != false || a.body["Image"] != nil || a.body["ConnectedVia"] != "NotConnected" ||
		get[string](t, a.body, "Actions", "#VirtualMedia.InsertMedia", "target") != InsertPath {
		t.Errorf("empty: %s", a.raw)
	}
	// By name: an .iso is a read-only CD-ROM, connected.
	if a := e.do(t, "POST", InsertPath, `{"Image":"boot.iso","Inserted":true,"WriteProtected":false}`); a.status != 204 {
		t.Fatalf("insert: %d %s", a.status, a.raw)
	}
	lun, _ := e.drive.Get()
	if lun.File != filepath.Join(e.dir, "boot.iso") || !lun.CDROM || !lun.RO {
		t.Errorf("LUN after insert: %+v", lun)
	}
	a = e.do(t, "GET", MediaPath, "")
	if a.body["Inserted"] != true || a.body["Image"] != "boot.iso" || a.body["ImageName"] != "boot.iso" ||
		a.body["WriteProtected"] != true || get[bool](t, a.body, "Oem", "PiKVM", "DriveOptical") != true {
		t.Errorf("inserted: %s", a.raw)
	}
	// Another image while one is in: the first is ejected first.
	if a := e.do(t, "POST", InsertPath, `{"Image":"disk.img","WriteProtected":false}`); a.status != 204 {
		t.Fatalf("insert over: %d %s", a.status, a.raw)
	}
	if lun, _ := e.drive.Get(); lun.File != filepath.Join(e.dir, "disk.img") || lun.CDROM || lun.RO {
		t.Errorf("LUN after the second insert: %+v", lun)
	}
	if a := e.do(t, "POST", EjectPath, `{}`); a.status != 204 {
		t.Fatalf("eject: %d %s", a.status, a.raw)
	}
	if lun, _ := e.drive.Get(); lun.File != "" {
		t.Errorf("LUN after eject: %+v", lun)
	}
	if a := e.do(t, "GET", MediaPath, ""); a.body["Inserted"] != false || a.body["ImageName"] != nil {
		t.Errorf("ejected: %s", a.raw)
	}
	if a := e.do(t, "POST", EjectPath, ``); a.status != 204 {
		t.Errorf("eject of an empty drive: %d %s", a.status, a.raw)
	}
	// Chosen, not connected.
	if a := e.do(t, "POST", InsertPath, `{"Image":"disk.img","Inserted":false}`); a.status != 204 {
		t.Fatalf("insert, not connected: %d %s", a.status, a.raw)
	}
	if lun, _ := e.drive.Get(); lun.File != "" {
		t.Errorf("connected though Inserted false: %+v", lun)
	}

	for _, tt := range []struct {
		body, id string
		status   int
	}{
		{`{}`, "ActionParameterMissing", 400},
		{`{"Image":""}`, "ActionParameterMissing", 400},
		{`{"Image":5}`, "ActionParameterValueTypeError", 400},
		{`{"Image":"boot.iso","Inserted":"yes"}`, "ActionParameterValueTypeError", 400},
		{`{"Image":"missing.iso"}`, "ActionParameterValueError", 400},
		{`{"Image":"../etc/passwd"}`, "ActionParameterValueFormatError", 400},
		{`{"Image":".hidden"}`, "ActionParameterValueFormatError", 400},
		{`{"Image":"nfs://host/x.iso"}`, "ActionParameterValueNotInList", 400},
		{`{"Image":"file:///etc/passwd"}`, "ActionParameterValueNotInList", 400},
		{`{"Image":"http:///x.iso"}`, "ActionParameterValueNotInList", 400},
		{`{"Image":"http://127.0.0.1:1/x.iso","TransferMethod":"Stream"}`, "ActionParameterValueNotInList", 400},
		{`{"Image":"http://127.0.0.1:1/x.iso","TransferProtocolType":"NFS"}`, "ActionParameterValueNotInList", 400},
		{`{"Image":"boot.iso","UserName":"u"}`, "ActionParameterNotSupported", 400},
		{`{"Image":"boot.iso","MediaType":"CD"}`, "ActionParameterUnknown", 400},
		{`{"Image":"boot.iso","Password":7}`, "ActionParameterValueTypeError", 400},
		{`{"Image":"http://127.0.0.1:1/x.iso"}`, "CouldNotEstablishConnection", 400},
	} {
		a := e.do(t, "POST", InsertPath, tt.body)
		if a.status != tt.status || a.errID(t) != tt.id {
			t.Errorf("%s: %d %s, want %d %s", tt.body, a.status, a.raw, tt.status, tt.id)
		}
		if strings.Contains(a.raw, `"7"`) && strings.Contains(tt.body, "Password") {
			t.Errorf("the password's value in the answer: %s", a.raw)
		}
	}
}

// TestInsertURL: an http(s) URL is downloaded into the storage first
// (TransferMethod Upload), then inserted; the medium's Image is the URL as
// given, so Ansible finds it to eject. A download cut short, or stopped
// by an EjectMedia, leaves nothing in the storage, no goroutine and no
// connection.
func TestInsertURL(t *testing.T) {
	img := make([]byte, msd.MinCDROMSize+4096)
	rand.Read(img)
	hold := make(chan struct{})
	var conns sync.WaitGroup
	files := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/live.iso":
			if u, p, ok := r.BasicAuth(); r.URL.Query().Has("auth") && (!ok || u != "me" || p != "secret") {
				http.Error(w, "who", http.StatusUnauthorized)
				return
			}
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(img))
		case "/slow.iso":
			w.Header().Set("Content-Length", strconv.Itoa(len(img)))
			w.Write(img[:4096])
			w.(http.Flusher).Flush()
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		case "/cut.iso":
			w.Header().Set("Content-Length", strconv.Itoa(len(img)))
			w.Write(img[:1000])
		default:
			http.NotFound(w, r)
		}
	}))
	files.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			conns.Done()
		}
	}
	files.Start()
	defer files.Close()
	before := runtime.NumGoroutine()
	e := newEnv(t)

	url := files.URL + "/live.iso?auth=1"
	body := `{"Image":"` + url + `","UserName":"me","Password":"secret","TransferProtocolType":"HTTP","TransferMethod":"Upload"}`
	if a := e.do(t, "POST", InsertPath, body); a.status != 204 {
		t.Fatalf("insert by URL: %d %s", a.status, a.raw)
	}
	if got, _ := os.ReadFile(filepath.Join(e.dir, "live.iso")); !bytes.Equal(got, img) {
		t.Error("the downloaded image differs")
	}
	a := e.do(t, "GET", MediaPath, "")
	if a.body["Image"] != url || a.body["ImageName"] != "live.iso" || a.body["Inserted"] != true || a.body["ConnectedVia"] != "URI" {
		t.Errorf("inserted by URL: %s", a.raw)
	}
	if strings.Contains(a.raw, "secret") {
		t.Errorf("the password shows: %s", a.raw)
	}
	// The same name again: never replaced nor reused silently.
	if a := e.do(t, "POST", InsertPath, body); a.status != 409 || a.errID(t) != "ResourceAlreadyExists" {
		t.Errorf("again: %d %s", a.status, a.raw)
	}
	if a := e.do(t, "POST", InsertPath, `{"Image":"`+files.URL+`/cut.iso"}`); a.status != 400 || !strings.Contains(a.raw, "stopped after 1000 of") {
		t.Errorf("cut: %d %s", a.status, a.raw)
	}

	// An EjectMedia stops a download under way.
	done := make(chan answer)
	go func() { done <- e.do(t, "POST", InsertPath, `{"Image":"`+files.URL+`/slow.iso"}`) }()
	waitFor(t, func() bool {
		st := e.media.State()
		return st.Storage != nil && st.Storage.Uploading != nil && st.Storage.Uploading.Written > 0
	})
	if a := e.do(t, "GET", MediaPath, ""); get[float64](t, a.body, "Oem", "PiKVM", "Uploading", "written") != 4096 {
		t.Errorf("progress: %s", a.raw)
	}
	if a := e.do(t, "POST", InsertPath, `{"Image":"`+files.URL+`/live.iso"}`); a.status != 409 || a.errID(t) != "ResourceInUse" {
		t.Errorf("a second download at once: %d %s", a.status, a.raw)
	}
	if a := e.do(t, "POST", EjectPath, `{}`); a.status != 204 {
		t.Errorf("eject: %d %s", a.status, a.raw)
	}
	if a := <-done; a.status != 400 || !strings.Contains(a.raw, "EjectMedia") {
		t.Errorf("the stopped insert: %d %s", a.status, a.raw)
	}
	close(hold)
	ents, _ := os.ReadDir(e.dir)
	var names []string
	for _, de := range ents {
		names = append(names, de.Name())
	}
	if !slices.Equal(names, []string{"boot.iso", "disk.img", "live.iso"}) {
		t.Errorf("storage holds %q", names)
	}
	e.srv.Close()
	files.CloseClientConnections()
	waitFor(t, func() bool { return runtime.NumGoroutine() <= before })
	conns.Wait()
}

func TestSessions(t *testing.T) {
	e := newEnv(t)
	a := e.do(t, "POST", SessionsPath, `{"UserName":"op","Password":"pw"}`)
	if a.status != 201 || len(a.header.Get("X-Auth-Token")) != 64 || a.header.Get("Location") != SessionsPath+"/s1" ||
		a.body["UserName"] != "op" || a.body["Id"] != "s1" {
		t.Fatalf("login: %d %v %s", a.status, a.header, a.raw)
	}
	if strings.Contains(a.raw, "pw") {
		t.Errorf("the password in the answer: %s", a.raw)
	}
	e.sessions.live["x9"] = auth.SessionInfo{ID: "x9", User: "other"}
	a = e.do(t, "GET", SessionsPath, "")
	if a.body["Members@odata.count"] != 1.0 {
		t.Errorf("an operator sees only its own sessions: %s", a.raw)
	}
	if a := e.do(t, "GET", SessionsPath+"/s1", ""); a.status != 200 || a.body["UserName"] != "op" {
		t.Errorf("own session: %d %s", a.status, a.raw)
	}
	for _, m := range []string{"GET", "DELETE"} {
		if a := e.do(t, m, SessionsPath+"/x9", ""); a.status != 404 || a.errID(t) != "ResourceNotFound" {
			t.Errorf("%s another's session: %d %s", m, a.status, a.raw)
		}
	}
	e.caller.Role = auth.RoleAdmin
	if a := e.do(t, "GET", SessionsPath, ""); a.body["Members@odata.count"] != 2.0 {
		t.Errorf("an admin sees every session: %s", a.raw)
	}
	if a := e.do(t, "DELETE", SessionsPath+"/x9", ""); a.status != 204 {
		t.Errorf("an admin ends another's: %d %s", a.status, a.raw)
	}
	e.caller.Role = auth.RoleOperator
	if a := e.do(t, "DELETE", SessionsPath+"/s1", ""); a.status != 204 || !slices.Equal(e.sessions.ended, []string{"x9", "s1"}) {
		t.Errorf("logout: %d %s %v", a.status, a.raw, e.sessions.ended)
	}
	if a := e.do(t, "GET", SessionService, ""); a.body["SessionTimeout"] != 3600.0 || get[string](t, a.body, "Sessions", "@odata.id") != SessionsPath {
		t.Errorf("session service: %s", a.raw)
	}
	for _, tt := range []struct {
		body, id string
		status   int
	}{
		{`{"UserName":"op","Password":"wrong"}`, "NoValidSession", 401},
		{`{"UserName":"op"}`, "CreateFailedMissingReqProperties", 400},
		{`{"Password":"pw"}`, "CreateFailedMissingReqProperties", 400},
		{`{"UserName":"op","Password":12345}`, "PropertyValueTypeError", 400},
		{`{"UserName":"Bad User","Password":"pw"}`, "NoValidSession", 401},
		{`{"UserName":"op","Password":"pw\u0000"}`, "NoValidSession", 401},
		{`not json`, "MalformedJSON", 400},
	} {
		a := e.do(t, "POST", SessionsPath, tt.body)
		if a.status != tt.status || a.errID(t) != tt.id {
			t.Errorf("%s: %d %s, want %d %s", tt.body, a.status, a.raw, tt.status, tt.id)
		}
		if strings.Contains(a.raw, "12345") || strings.Contains(a.raw, "wrong") {
			t.Errorf("%s: the password in the answer: %s", tt.body, a.raw)
		}
	}
}

func TestErrorBody(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, &Error{Status: 429, ID: "ServiceTemporarilyUnavailable", Msg: "wait", RetryAfter: 1500 * time.Millisecond, Args: []string{"2"}})
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "2" {
		t.Errorf("%d %v", rec.Code, rec.Header())
	}
	want := `{"error":{"code":"Base.1.16.GeneralError","message":"A request failed; see @Message.ExtendedInfo for why.","@Message.ExtendedInfo":[{"@odata.type":"#Message.v1_1_1.Message","MessageId":"Base.1.16.ServiceTemporarilyUnavailable","Message":"wait","MessageArgs":["2"],"MessageSeverity":"Warning"}]}}`
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
	for status, id := range map[int]string{401: "NoValidSession", 403: "InsufficientPrivilege", 404: "ResourceNotFound", 405: "OperationNotAllowed", 413: "PayloadTooLarge", 429: "ServiceTemporarilyUnavailable", 500: "InternalError", 400: "GeneralError"} {
		if e := FromStatus(status, "m"); e.ID != id || e.Status != status {
			t.Errorf("FromStatus(%d): %s", status, e.ID)
		}
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("timed out\n%s", buf[:runtime.Stack(buf, true)])
		}
	}
}
