package httpd

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/board"
	"kvmd/diag"
	"kvmd/hw"
	"kvmd/internal/fixture"
)

// demoDiag makes real bundles of the demo board's tree (journal absent).
func demoDiag(t *testing.T) DiagSource {
	root := filepath.Join(t.TempDir(), "root")
	if err := fixture.Unpack(bytes.NewReader(board.DemoArchive), root); err != nil {
		t.Fatal(err)
	}
	return func(identities bool) (DiagBundle, error) {
		r, err := diag.NewRedactor(diag.Secrets{}, identities, "raspberrypi")
		if err != nil {
			return nil, err
		}
		return diag.New(diag.Config{FS: hw.New(root), Redactor: r, Version: "test",
			Journal: diag.Journal{Dir: t.TempDir(), Units: []string{"kvmd.service"}}}), nil
	}
}

func unzipReply(t *testing.T, body []byte) map[string]string {
	t.Helper()
	z, err := zip.NewReader(bytes.NewReader(body), int64(len(body)))
	if err != nil {
		t.Fatalf("not a zip archive (%d bytes): %v", len(body), err)
	}
	if len(z.File) == 0 || z.File[0].Name != "summary.txt" {
		t.Errorf("summary.txt is not the first file")
	}
	files := map[string]string{}
	for _, f := range z.File {
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		files[f.Name] = string(b)
	}
	return files
}

// getRaw sends a request whose reply may be no JSON envelope.
func (e *env) getRaw(method, path string, hdr map[string]string) reply {
	e.t.Helper()
	r, _ := http.NewRequest(method, e.base+path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "application/json" {
		return parseReply(e.t, resp)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: body}
}

func TestDiagnostics(t *testing.T) {
	e := newEnv(t, envOpts{diag: demoDiag(t)})
	if r := e.req("GET", "/api/diagnostics", nil, ""); r.status != 401 {
		t.Errorf("without credentials: %d, want 401", r.status)
	}
	if r := e.req("GET", "/api/diagnostics", xhdr("admin", "wrong"), ""); r.status != 403 {
		t.Errorf("wrong password: %d, want 403", r.status)
	}
	if r := e.req("GET", "/api/diagnostics?redact_identities=maybe", xhdr("admin", "admin-pass"), ""); r.status != 400 || r.errName != "ValidatorError" {
		t.Errorf("redact_identities=maybe: %d %s, want 400 ValidatorError", r.status, r.errName)
	}

	name := regexp.MustCompile(`^kvmd-diag-(raspberrypi|kvmd)-\d{8}T\d{6}Z\.zip$`)
	for _, tt := range []struct {
		query, host string
	}{{"", "raspberrypi"}, {"?redact_identities=1", "kvmd"}} {
		r := e.getRaw("GET", "/api/diagnostics"+tt.query, xhdr("admin", "admin-pass"))
		if r.status != 200 || r.header.Get("Content-Type") != "application/zip" {
			t.Fatalf("%q: %d %s: %s", tt.query, r.status, r.header.Get("Content-Type"), r.body)
		}
		_, params, err := mime.ParseMediaType(r.header.Get("Content-Disposition"))
		if err != nil || !name.MatchString(params["filename"]) || !strings.Contains(params["filename"], "-"+tt.host+"-") {
			t.Errorf("%q: Content-Disposition %q", tt.query, r.header.Get("Content-Disposition"))
		}
		if r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("%q: Cache-Control %q", tt.query, r.header.Get("Cache-Control"))
		}
		files := unzipReply(t, r.body)
		has := strings.Contains(files["info.json"]+files["versions.txt"]+files["summary.txt"], "raspberrypi")
		if has != (tt.query == "") {
			t.Errorf("%q: host name in the bundle: %t", tt.query, has)
		}
	}
	if r := e.getRaw("HEAD", "/api/diagnostics", xhdr("admin", "admin-pass")); r.status != 200 || len(r.body) != 0 ||
		r.header.Get("Content-Disposition") == "" {
		t.Errorf("HEAD: %d, %d bytes, %q", r.status, len(r.body), r.header.Get("Content-Disposition"))
	}
	if r := e.req("POST", "/api/diagnostics", xhdr("admin", "admin-pass"), ""); r.status != 405 {
		t.Errorf("POST: %d, want 405", r.status)
	}
}

// slowBundle blocks until released, to hold the one bundle slot.
type slowBundle struct{ started, release chan struct{} }

func (s *slowBundle) FileName() string { return "x.zip" }
func (s *slowBundle) Write(ctx context.Context, w io.Writer) error {
	close(s.started)
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	_, err := w.Write([]byte("PK"))
	return err
}

func TestDiagnosticsOneAtATime(t *testing.T) {
	b := &slowBundle{started: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, envOpts{diag: func(bool) (DiagBundle, error) { return b, nil }})
	var wg sync.WaitGroup
	wg.Go(func() { e.getRaw("GET", "/api/diagnostics", xhdr("admin", "admin-pass")) })
	select {
	case <-b.started:
	case <-time.After(5 * time.Second):
		t.Fatal("the first bundle never started")
	}
	r := e.req("GET", "/api/diagnostics", xhdr("admin", "admin-pass"), "")
	close(b.release)
	wg.Wait()
	if r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Errorf("a second bundle at once: %d (Retry-After %q), want 503 with Retry-After", r.status, r.header.Get("Retry-After"))
	}
}

func TestDiagnosticsSourceError(t *testing.T) {
	e := newEnv(t, envOpts{diag: func(bool) (DiagBundle, error) {
		return nil, errors.New("diag: reading /etc/kvmd/totp.secret for its secrets: permission denied")
	}})
	r := e.req("GET", "/api/diagnostics", xhdr("admin", "admin-pass"), "")
	if r.status != 503 || r.errName != "UnavailableError" || strings.Contains(string(r.body), "totp.secret") {
		t.Errorf("%d %s: %s; want 503 UnavailableError without the cause", r.status, r.errName, r.body)
	}
}
