package httpd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kvmd/atx"
	"kvmd/events"
	"kvmd/internal/testutil"
	"kvmd/msd"
	"kvmd/msd/msdtest"
	"kvmd/subsystem"
)

// msdEnv is a server whose /api/msd is a real msd.Manager over a storage
// directory holding files, with the stand-in LUN, publishing its events
// as serve does.
type msdEnv struct {
	*env
	m     *msd.Manager
	drive *msdtest.Drive
	dir   string
	mlog  *testutil.SyncBuffer // the manager's log
}

func newMSDEnv(t *testing.T, o envOpts, stall time.Duration, files map[string]string) *msdEnv {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	drive := &msdtest.Drive{}
	mlog := &testutil.SyncBuffer{}
	m, err := msd.New(msd.Config{Dir: dir, Drive: drive, Log: slog.New(slog.NewTextHandler(mlog, nil)), PollEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	hub := &events.Hub{}
	sub := subsystem.Of[msd.State](msd.Subsystem{M: m})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { subsystem.Watch(ctx, sub, hub); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	o.devices = &Devices{
		Events: hub, Version: "4.108.1", MSD: m, MSDStall: stall,
		Subsystems: testSubsystems(atx.Subsystem{}, sub),
	}
	return &msdEnv{env: newEnv(t, o), m: m, drive: drive, dir: dir, mlog: mlog}
}

var (
	adminHdr    = map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "admin-pass"}
	operatorHdr = map[string]string{"X-KVMD-User": "operator", "X-KVMD-Passwd": "operator-pass"}
	viewerHdr   = map[string]string{"X-KVMD-User": "viewer", "X-KVMD-Passwd": "viewer pass"}
)

// upload POSTs data as the raw body of /api/msd/write, as kvmd's clients
// do, with its length in Content-Length.
func (e *msdEnv) upload(query string, hdr map[string]string, data []byte) reply {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.base+"/api/msd/write?"+query, bytes.NewReader(data))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	return parseReply(e.t, resp)
}

// files lists the storage directory: images and anything else.
func (e *msdEnv) files() []string {
	e.t.Helper()
	ents, err := os.ReadDir(e.dir)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, d := range ents {
		out = append(out, d.Name())
	}
	return out
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// msdState GETs /api/msd.
func (e *msdEnv) msdState(hdr map[string]string) msd.State {
	e.t.Helper()
	r := e.req("GET", "/api/msd", hdr, "")
	if r.status != 200 {
		e.t.Fatalf("GET /api/msd: %d %s", r.status, r.body)
	}
	var env struct{ Result msd.State }
	if err := json.Unmarshal(r.body, &env); err != nil {
		e.t.Fatal(err)
	}
	return env.Result
}

// TestMSDFlow: upload an image far over the 4 KiB body limit, read it
// back, choose it, connect it (the LUN gets ro, cdrom, then file), see it
// in /api/msd, eject, remove.
func TestMSDFlow(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, nil)
	img := randomBytes(3<<20 + 17)
	r := e.upload("image=disk.img", operatorHdr, img)
	if r.status != 200 || string(r.body) != `{"ok":true,"result":{"image":{"name":"disk.img","size":3145745,"written":3145745}}}` {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	if got := e.files(); !slices.Equal(got, []string{"disk.img"}) {
		t.Errorf("storage holds %q", got)
	}
	st := e.msdState(viewerHdr)
	if st.Storage == nil || st.Drive == nil || st.Storage.Images["disk.img"].Size != int64(len(img)) {
		t.Fatalf("state: %+v", st)
	}

	// Read it back, as an attachment.
	req, _ := http.NewRequest("GET", e.base+"/api/msd/read?image=disk.img", nil)
	req.Header.Set("X-KVMD-User", "operator")
	req.Header.Set("X-KVMD-Passwd", "operator-pass")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, img) || resp.Header.Get("Content-Disposition") != "attachment; filename*=UTF-8''disk.img" ||
		resp.Header.Get("Content-Type") != "application/octet-stream" || resp.ContentLength != int64(len(img)) {
		t.Errorf("read: %d, %d bytes, %q", resp.StatusCode, len(got), resp.Header)
	}

	for _, step := range []struct{ path, want string }{
		{"/api/msd/set_params?image=disk.img&cdrom=0&rw=1", ""},
		{"/api/msd/set_connected?connected=1", ""},
		{"/api/msd/set_params?rw=0", "MsdConnectedError"},
		{"/api/msd/remove?image=disk.img", "MsdConnectedError"},
		{"/api/msd/set_connected?connected=0", ""},
		{"/api/msd/set_connected?connected=0", "MsdDisconnectedError"},
		{"/api/msd/remove?image=disk.img", ""},
		{"/api/msd/remove?image=disk.img", "MsdUnknownImageError"},
		{"/api/msd/set_connected?connected=1", "MsdImageNotSelected"},
		{"/api/msd/reset", ""},
	} {
		r := e.req("POST", step.path, operatorHdr, "")
		if r.errName != step.want || (step.want == "") != (r.status == 200) {
			t.Errorf("%s: %d %s %q, want %q", step.path, r.status, r.errName, r.errMsg, step.want)
		}
		if step.path == "/api/msd/set_connected?connected=1" && step.want == "" {
			st := e.msdState(viewerHdr)
			if !st.Drive.Connected || !st.Drive.RW || st.Drive.Image.Name != "disk.img" {
				t.Errorf("connected state: %+v", st.Drive)
			}
			want := []string{"ro=0", "cdrom=0", "file=" + filepath.Join(realPath(t, e.dir), "disk.img")}
			if w := e.drive.Writes(); !slices.Equal(w, want) {
				t.Errorf("LUN writes %q, want %q", w, want)
			}
		}
	}
	if got := e.files(); len(got) != 0 {
		t.Errorf("storage holds %q after remove", got)
	}
}

func realPath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestMSDRoles: listing is a viewer's; uploading, choosing, connecting,
// removing, resetting and reading an image's bytes an operator's.
func TestMSDRoles(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, map[string]string{"a.img": strings.Repeat("x", 512)})
	if r := e.req("GET", "/api/msd", viewerHdr, ""); r.status != 200 {
		t.Errorf("viewer GET /api/msd: %d", r.status)
	}
	for _, p := range []string{"/api/msd/set_params?cdrom=1", "/api/msd/set_connected?connected=1", "/api/msd/remove?image=a.img",
		"/api/msd/reset", "/api/msd/write_remote?url=http://127.0.0.1:1/x.iso"} {
		if r := e.req("POST", p, viewerHdr, ""); r.status != 403 || r.errName != "ForbiddenError" {
			t.Errorf("viewer POST %s: %d %s", p, r.status, r.errName)
		}
	}
	if r := e.req("GET", "/api/msd/read?image=a.img", viewerHdr, ""); r.status != 403 {
		t.Errorf("viewer read: %d", r.status)
	}
	if r := e.upload("image=v.img", viewerHdr, []byte("data")); r.status != 403 {
		t.Errorf("viewer upload: %d", r.status)
	}
	if got := e.files(); !slices.Equal(got, []string{"a.img"}) {
		t.Errorf("storage holds %q", got)
	}
	if r := e.req("POST", "/api/msd/set_params?cdrom=1", operatorHdr, ""); r.status != 200 {
		t.Errorf("operator set_params: %d %s", r.status, r.body)
	}
}

// TestMSDBodyLimitOnlyForWrite: the 4 KiB body limit still holds on
// every other route, set_params and login included.
func TestMSDBodyLimitOnlyForWrite(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, nil)
	big := strings.Repeat("x", 5000)
	if r := e.req("POST", "/api/msd/set_params?cdrom=1", operatorHdr, big); r.status != 413 || r.errName != "RequestTooLargeError" {
		t.Errorf("set_params with 5000 bytes: %d %s", r.status, r.errName)
	}
	if r := e.req("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, big); r.status != 413 {
		t.Errorf("login with 5000 bytes: %d", r.status)
	}
	if r := e.upload("image=ok.img", operatorHdr, []byte(big)); r.status != 200 {
		t.Errorf("write with 5000 bytes: %d %s", r.status, r.body)
	}
}

// rawConn opens a TCP connection to the server and sends a request head.
func (e *msdEnv) rawConn(head string) net.Conn {
	e.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, head); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func uploadHead(name string, size int64, creds bool) string {
	h := fmt.Sprintf("POST /api/msd/write?image=%s HTTP/1.1\r\nHost: kvmd\r\nContent-Length: %d\r\n", name, size)
	if creds {
		h += "X-KVMD-User: operator\r\nX-KVMD-Passwd: operator-pass\r\n"
	}
	return h + "\r\n"
}

// readReply reads one HTTP reply from c; closing says it came with
// Connection: close.
func readReply(t *testing.T, c net.Conn) (r reply, closing bool) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return parseReply(t, resp), resp.Close
}

// TestMSDUploadRefusedFirst: a request that is not allowed to upload
// (no credentials, a viewer, a taken name, a size over the free space,
// no Content-Length) is answered at once, before its body, and its
// connection closed: nothing of a huge body is read.
func TestMSDUploadRefusedFirst(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, map[string]string{"taken.img": "x"})
	free := e.m.State().Storage.Parts[""].Free
	for _, tc := range []struct {
		head    string
		status  int
		errName string
	}{
		{uploadHead("a.img", 100<<30, false), 401, "UnauthorizedError"},
		{strings.Replace(uploadHead("a.img", 100<<30, false), "\r\n\r\n", "\r\nX-KVMD-User: viewer\r\nX-KVMD-Passwd: viewer pass\r\n\r\n", 1), 403, "ForbiddenError"},
		{uploadHead("taken.img", 10, true), 400, "MsdImageExistsError"},
		{uploadHead("huge.img", free+1<<30, true), 413, "MsdNoSpaceError"},
		{uploadHead("..%2Fetc.img", 10, true), 400, "ValidatorError"},
		{uploadHead(".hidden", 10, true), 400, "ValidatorError"},
		{uploadHead("a.img&prefix=sub", 10, true), 400, "ValidatorError"},
		{"POST /api/msd/write?image=c.img HTTP/1.1\r\nHost: kvmd\r\nTransfer-Encoding: chunked\r\nX-KVMD-User: operator\r\nX-KVMD-Passwd: operator-pass\r\n\r\n", 400, "ValidatorError"},
		// No Content-Length at all: net/http reads no body, which made an
		// empty image.
		{"POST /api/msd/write?image=d.img HTTP/1.1\r\nHost: kvmd\r\nX-KVMD-User: operator\r\nX-KVMD-Passwd: operator-pass\r\n\r\n", 400, "ValidatorError"},
		// A name with a space at either end is refused, not stored
		// trimmed.
		{uploadHead("%20lead%20", 10, true), 400, "ValidatorError"},
	} {
		c := e.rawConn(tc.head)
		start := time.Now()
		r, closing := readReply(t, c)
		if r.status != tc.status || r.errName != tc.errName {
			t.Errorf("%q: %d %s %q, want %d %s", strings.SplitN(tc.head, "\r\n", 2)[0], r.status, r.errName, r.errMsg, tc.status, tc.errName)
		}
		if !closing {
			t.Errorf("%q: the connection stays open for an unread body", strings.SplitN(tc.head, "\r\n", 2)[0])
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("%q: after the reply, read %d, %v; want the connection closed", strings.SplitN(tc.head, "\r\n", 2)[0], n, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("answered after %v", d)
		}
	}
	if got := e.files(); !slices.Equal(got, []string{"taken.img"}) {
		t.Errorf("storage holds %q", got)
	}
}

// TestMSDUploadCut: a connection cut mid-upload leaves no image and no
// file; while it ran, /api/msd and its event showed its progress.
func TestMSDUploadCut(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, nil)
	ws := dialWS(t, e.env, "", adminHeader)
	c := e.rawConn(uploadHead("cut.img", 1<<20, true))
	c.Write(randomBytes(300 << 10))
	eventually(t, "uploading in /api/msd", func() bool {
		u := e.msdState(viewerHdr).Storage.Uploading
		return u != nil && u.Name == "cut.img" && u.Size == 1<<20 && u.Written == 300<<10
	})
	if !e.msdState(viewerHdr).Busy {
		t.Error("not busy while uploading")
	}
	// The event stream carried the progress.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ev := readEvent(t, ws)
		if ev.Type == "msd" && strings.Contains(string(ev.Event), `"uploading":{"name":"cut.img","size":1048576,"written":307200}`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no msd event with the upload's progress")
		}
	}
	if got := e.files(); len(got) != 1 || !strings.HasPrefix(got[0], ".") {
		t.Errorf("mid-upload the storage holds %q, want one hidden temporary file", got)
	}
	c.Close()
	eventually(t, "upload gone", func() bool {
		st := e.msdState(viewerHdr)
		return st.Storage.Uploading == nil && !st.Busy && len(e.files()) == 0
	})
	if len(e.msdState(viewerHdr).Storage.Images) != 0 {
		t.Error("the cut image is listed")
	}
}

// TestMSDTokenNamesNotLogged: an image named like an API token (pasted
// where a name belongs) is uploaded, connected and removed without the
// name reaching the log: it shows as [token]. It was logged verbatim.
func TestMSDTokenNamesNotLogged(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, nil)
	name := "kvmd_" + strings.Repeat("3f", 32) + ".img"
	if r := e.upload("image="+name, operatorHdr, []byte(strings.Repeat("x", 4096))); r.status != 200 {
		t.Fatalf("upload: %d %s", r.status, r.body)
	}
	if r := e.req("POST", "/api/msd/set_params?image="+name, operatorHdr, ""); r.status != 200 {
		t.Fatalf("set_params: %d %s", r.status, r.body)
	}
	if r := e.req("POST", "/api/msd/remove?image="+name, operatorHdr, ""); r.status != 200 {
		t.Fatalf("remove: %d %s", r.status, r.body)
	}
	logs := e.logs.String() + e.mlog.String()
	if strings.Contains(logs, strings.Repeat("3f", 8)) || !strings.Contains(logs, "image=[token]") {
		t.Errorf("the token-shaped name in the log:\n%s", logs)
	}
}

// TestMSDUploadStopped: an upload whose session ends says so, at once,
// not that it stalled: the session's end cuts the read by its deadline,
// and the answer said "stalled (no data for 1m0s)" after a second.
func TestMSDUploadStopped(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, nil)
	tok := e.login("operator", "operator-pass")
	c := e.rawConn(strings.Replace(uploadHead("stop.img", 1<<20, false), "\r\n\r\n", "\r\nCookie: auth_token="+tok+"\r\n\r\n", 1))
	c.Write(randomBytes(300 << 10))
	eventually(t, "uploading", func() bool {
		u := e.msdState(viewerHdr).Storage.Uploading
		return u != nil && u.Written == 300<<10
	})
	e.req("POST", "/api/auth/logout", cookie(tok), "")
	r, _ := readReply(t, c)
	if r.status != 400 || r.errName != "MsdOperationError" || !strings.Contains(r.errMsg, "was stopped") || !strings.Contains(r.errMsg, "307200 of 1048576") {
		t.Errorf("an upload whose session ended: %d %s %q", r.status, r.errName, r.errMsg)
	}
	if got := e.files(); len(got) != 0 {
		t.Errorf("storage holds %q", got)
	}
}

// TestMSDUploadStall: a body that stops coming is cut after the stall
// bound (60 s on a device), answered, and leaves nothing.
func TestMSDUploadStall(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 300*time.Millisecond, nil)
	c := e.rawConn(uploadHead("stall.img", 1<<20, true))
	c.Write(randomBytes(1000))
	r, _ := readReply(t, c)
	if r.status != 400 || r.errName != "MsdOperationError" || !strings.Contains(r.errMsg, "stalled") || !strings.Contains(r.errMsg, "1000 of 1048576") {
		t.Errorf("stalled upload: %d %s %q", r.status, r.errName, r.errMsg)
	}
	if got := e.files(); len(got) != 0 {
		t.Errorf("storage holds %q", got)
	}
}

// TestMSDSecondUploadBusy: one upload at a time; the second is kvmd's
// 409 MsdIsBusyError; drive operations go on beside it.
func TestMSDSecondUploadBusy(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, map[string]string{"a.img": strings.Repeat("x", 512)})
	c := e.rawConn(uploadHead("first.img", 1<<20, true))
	c.Write([]byte("some"))
	eventually(t, "uploading", func() bool { return e.msdState(viewerHdr).Storage.Uploading != nil })
	if r := e.upload("image=second.img", operatorHdr, []byte("data")); r.status != 409 || r.errName != "MsdIsBusyError" {
		t.Errorf("second upload: %d %s", r.status, r.errName)
	}
	for _, p := range []string{"/api/msd/set_params?image=a.img", "/api/msd/set_connected?connected=1", "/api/msd/set_connected?connected=0"} {
		if r := e.req("POST", p, operatorHdr, ""); r.status != 200 {
			t.Errorf("%s during an upload: %d %s", p, r.status, r.body)
		}
	}
}

// TestMSDWriteRemote: write_remote downloads with TLS verified (a server
// whose certificate is not trusted is refused), insecure=1 as kvmd,
// answering kvmd's ndjson progress lines; a download cut short ends with
// an error line and leaves nothing.
func TestMSDWriteRemote(t *testing.T) {
	img := randomBytes(2<<20 + 5)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/images/debian.iso":
			http.ServeContent(w, r, "debian.iso", time.Time{}, bytes.NewReader(img))
		case "/named":
			w.Header().Set("Content-Disposition", `attachment; filename="from-header.img"`)
			http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(img[:1000]))
		case "/cut.img":
			w.Header().Set("Content-Length", "1000000")
			w.Write(img[:1000])
			// The handler returns with the body short: the client sees
			// an unexpected EOF.
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	e := newMSDEnv(t, envOpts{}, 0, nil)

	if r := e.req("POST", "/api/msd/write_remote?url="+srv.URL+"/images/debian.iso", operatorHdr, ""); r.status != 400 || r.errName != "ClientError" {
		t.Errorf("untrusted certificate: %d %s %q", r.status, r.errName, r.errMsg)
	}
	if r := e.req("POST", "/api/msd/write_remote?insecure=1&url="+srv.URL+"/missing.iso", operatorHdr, ""); r.status != 400 || r.errName != "ClientError" || !strings.Contains(r.errMsg, "404") {
		t.Errorf("404: %d %s %q", r.status, r.errName, r.errMsg)
	}
	if r := e.req("POST", "/api/msd/write_remote?url=file:///etc/passwd", operatorHdr, ""); r.status != 400 || r.errName != "ValidatorError" {
		t.Errorf("file URL: %d %s", r.status, r.errName)
	}

	lines := e.ndjson(t, "/api/msd/write_remote?insecure=1&remove_incomplete=1&url="+srv.URL+"/images/debian.iso")
	first, last := lines[0], lines[len(lines)-1]
	if first != `{"ok":true,"result":{"image":{"name":"debian.iso","size":2097157,"written":0}}}` ||
		last != `{"ok":true,"result":{"image":{"name":"debian.iso","size":2097157,"written":2097157}}}` {
		t.Errorf("progress lines: %q", lines)
	}
	if got, _ := os.ReadFile(filepath.Join(e.dir, "debian.iso")); !bytes.Equal(got, img) {
		t.Error("the downloaded image differs")
	}
	lines = e.ndjson(t, "/api/msd/write_remote?insecure=1&url="+srv.URL+"/named")
	if !strings.Contains(lines[len(lines)-1], `"name":"from-header.img","size":1000,"written":1000`) {
		t.Errorf("named by Content-Disposition: %q", lines)
	}
	lines = e.ndjson(t, "/api/msd/write_remote?insecure=1&image=mine.img&url="+srv.URL+"/named")
	if !strings.Contains(lines[len(lines)-1], `"name":"mine.img"`) {
		t.Errorf("named by image=: %q", lines)
	}
	lines = e.ndjson(t, "/api/msd/write_remote?insecure=1&url="+srv.URL+"/cut.img")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], `{"ok":false,"result":{"error":"MsdOperationError","error_msg":"The upload was cut after 1000 of 1000000 bytes`) {
		t.Errorf("cut download: %q", lines)
	}
	if got := e.files(); !slices.Equal(got, []string{"debian.iso", "from-header.img", "mine.img"}) {
		t.Errorf("storage holds %q", got)
	}
}

// ndjson POSTs path as an operator and returns the lines of its reply.
func (e *msdEnv) ndjson(t *testing.T, path string) []string {
	t.Helper()
	req, _ := http.NewRequest("POST", e.base+path, nil)
	for k, v := range operatorHdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %d %q %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	b, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\r\n"), "\r\n") {
		if !json.Valid([]byte(l)) {
			t.Fatalf("not a JSON line: %q", l)
		}
		out = append(out, l)
	}
	return out
}

// TestMSDParams: kvmd's validation of the query.
func TestMSDParams(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, map[string]string{"a.img": strings.Repeat("x", 512), "my file.iso": strings.Repeat("x", msd.MinCDROMSize)})
	for _, tc := range []struct {
		method, path, errName string
	}{
		{"POST", "/api/msd/set_params?image=http://example.com/x.iso", "MsdRemoteDisabledError"},
		{"POST", "/api/msd/set_params?cdrom=maybe", "ValidatorError"},
		{"POST", "/api/msd/set_params?image=../../etc/passwd", "ValidatorError"},
		{"POST", "/api/msd/set_params?image=nope.img", "MsdUnknownImageError"},
		{"POST", "/api/msd/set_params?image=.hidden", "ValidatorError"},
		{"POST", "/api/msd/remove?image=bad%01name", "ValidatorError"},
		{"POST", "/api/msd/set_params?image=%20a.img%20", "ValidatorError"}, // kvmd strips it: refused here, as on upload
		{"POST", "/api/msd/set_params?image=/a.img", ""},                    // kvmd drops empty parts
		{"POST", "/api/msd/set_params?image=my%20file.iso&cdrom=1", ""},
		{"POST", "/api/msd/set_params?image=", ""}, // no image
		{"POST", "/api/msd/set_connected", "ValidatorError"},
		{"POST", "/api/msd/set_connected?connected=2", "ValidatorError"},
		{"POST", "/api/msd/remove", "ValidatorError"},
		{"POST", "/api/msd/remove?image=a/b.img", "ValidatorError"},
		{"GET", "/api/msd/read?image=a.img&compress=zstd", "ValidatorError"},
		{"GET", "/api/msd/read?image=a.img&compress=gzip", "ValidatorError"},
		{"GET", "/api/msd/read?image=nope.img", "MsdUnknownImageError"},
		{"POST", "/api/msd/write_remote?url=http://x/y.iso&timeout=0", "ValidatorError"},
	} {
		r := e.req(tc.method, tc.path, operatorHdr, "")
		if r.errName != tc.errName || (tc.errName == "") != (r.status == 200) || (r.status != 200 && r.status != 400) {
			t.Errorf("%s %s: %d %s %q, want %q", tc.method, tc.path, r.status, r.errName, r.errMsg, tc.errName)
		}
	}
	// A name with characters to escape in the attachment's header.
	req, _ := http.NewRequest("GET", e.base+"/api/msd/read?image=my%20file.iso", nil)
	for k, v := range operatorHdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("Content-Disposition"); got != "attachment; filename*=UTF-8''my%20file.iso" {
		t.Errorf("Content-Disposition %q", got)
	}
}

// TestMSDDisabled: without a drive, kvmd's disabled MSD.
func TestMSDDisabled(t *testing.T) {
	d, b := testDevices(t)
	d.Subsystems = testSubsystems(atx.Subsystem{C: b.ctl}, subsystem.Of[msd.State](msd.Subsystem{}))
	e := newEnv(t, envOpts{devices: d})
	if r := e.req("GET", "/api/msd", adminHdr, ""); string(r.body) != `{"ok":true,"result":{"enabled":false,"online":false,"busy":false,"storage":null,"drive":null}}` {
		t.Errorf("state: %s", r.body)
	}
	if r := e.req("POST", "/api/msd/reset", adminHdr, ""); r.status != 400 || r.errName != "MsdDisabledError" {
		t.Errorf("reset: %d %s", r.status, r.errName)
	}
}
