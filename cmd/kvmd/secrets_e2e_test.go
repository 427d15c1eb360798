package main

import (
	"archive/zip"
	"bytes"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// TestServeBundleHoldsNoTokens plants an API token and a session token
// where a careless user puts them (in a URL's path, which is a 404, in
// its query, in the user field of a login) on the demo daemon, whose log
// goes to its journal, then takes a support bundle: neither token may be
// in it, nor in the journal the bundle is made from.
func TestServeBundleHoldsNoTokens(t *testing.T) {
	users := usersFile(t, "admin", "Bundle-Passw0rd")
	out, _, err := tokenRun("add", "ci", "--user", "admin", "--users", users)
	if err != nil {
		t.Fatal(err)
	}
	apiTok := regexp.MustCompile(`kvmd_[0-9a-f]{64}`).FindString(out)
	if apiTok == "" {
		t.Fatalf("no token in %q", out)
	}
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--demo", "--users", users, "--listen", addr)
	d.stderr.wait(t, `kvmd listening`)
	base := "http://" + addr
	do := func(method, path string, hdr map[string]string, body string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	resp, _ := do("POST", "/api/auth/login", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, "user=admin&passwd=Bundle-Passw0rd")
	var sessTok string
	for _, c := range resp.Cookies() {
		if c.Name == "auth_token" {
			sessTok = c.Value
		}
	}
	if len(sessTok) != 64 {
		t.Fatalf("login: %d, session token %q", resp.StatusCode, sessTok)
	}
	admin := map[string]string{"X-KVMD-User": "admin", "X-KVMD-Passwd": "Bundle-Passw0rd"}
	for _, p := range []string{"/api/" + apiTok, "/api/" + sessTok, "/api/info?fields=meta&token=" + apiTok + "&s=" + sessTok} {
		do("GET", p, admin, "")
	}
	for _, u := range []string{apiTok, sessTok} {
		do("GET", "/api/auth/check", map[string]string{"X-KVMD-User": u, "X-KVMD-Passwd": "wrong"}, "")
	}
	// The demo journal has the lines when /api/log shows them.
	deadline := time.Now().Add(10 * time.Second)
	var log []byte
	for {
		_, log = do("GET", "/api/log?seek=600", admin, "")
		if bytes.Count(log, []byte(" status=404 ")) >= 2 && bytes.Contains(log, []byte("auth failed")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the requests are not in the demo journal:\n%s", log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, bundle := do("GET", "/api/diagnostics", admin, "")
	if resp.StatusCode != 200 {
		t.Fatalf("diagnostics: %d %.300s", resp.StatusCode, bundle)
	}
	zr, err := zip.NewReader(bytes.NewReader(bundle), int64(len(bundle)))
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, f := range zr.File {
		rc, _ := f.Open()
		io.Copy(&all, rc)
		rc.Close()
	}
	for name, s := range map[string][]byte{"the journal": log, "the bundle": []byte(all.String()), "stderr": []byte(d.stderr.String())} {
		for _, tok := range []string{apiTok[len("kvmd_"):], sessTok} {
			if i := bytes.Index(s, []byte(tok)); i >= 0 {
				t.Errorf("%s holds the token %s…: %q", name, tok[:8], s[max(0, i-200):i])
			}
		}
	}
	if !strings.Contains(all.String(), "path=/api/[token] status=404") {
		t.Errorf("the bundle lacks the 404s' access lines")
	}
}
