package redfish

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"kvmd/auth"
	"kvmd/msd"
	"kvmd/msd/msdtest"
)

// FuzzActionBodies sends any body to every handler that reads one: the
// answer is a 2xx or a 4xx in Redfish's format, never a 5xx or a panic,
// and a password never comes back in it.
func FuzzActionBodies(f *testing.F) {
	for _, seed := range []string{
		`{"ResetType":"On"}`, `{"ResetType":1}`, `{"Image":"boot.iso","Inserted":false}`,
		`{"Image":"http://127.0.0.1:1/x.iso","UserName":"u","Password":"secret-pw"}`,
		`{"UserName":"op","Password":"secret-pw"}`, `{"Boot":{"BootSourceOverrideTarget":"Cd"}}`,
		``, `[]`, `null`, `{"a":`, "{\"Image\":\"\x00\"}",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	media, err := msd.New(msd.Config{Dir: dir, Drive: &msdtest.Drive{}})
	if err != nil {
		f.Fatal(err)
	}
	a := &fakeATX{enabled: true}
	svc := New(Config{Power: ATX{a}, Media: media, Sessions: &fakeSessions{live: map[string]auth.SessionInfo{}},
		Caller: func(context.Context) Caller { return Caller{User: "op", Role: auth.RoleOperator} },
		// Nowhere to download from: a fuzzed URL connects to nothing.
		Remote: msd.FetchOptions{Timeout: 100 * time.Millisecond,
			Deny: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}}})
	handlers := []Handler{(*Service).Reset, (*Service).PatchSystem, (*Service).SetDefaultBootOrder,
		(*Service).InsertMedia, (*Service).EjectMedia, (*Service).CreateSession}
	f.Fuzz(func(t *testing.T, body string) {
		secret := passwordOnly(body, "secret-pw")
		for _, h := range handlers {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("POST", "/", bytes.NewReader([]byte(body)))
			if err := h(svc, rec, req); err != nil {
				re, ok := err.(*Error)
				if !ok || re.Status >= 500 {
					t.Fatalf("body %q: %v", body, err)
				}
				WriteError(rec, re)
			}
			if rec.Code >= 500 || secret && bytes.Contains(rec.Body.Bytes(), []byte("secret-pw")) {
				t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
			}
		}
	})
}

// passwordOnly reports whether pw is in body only as (part of) the
// value of its Password field: then an answer that holds pw gave the
// password away. Elsewhere (an image's name, a URL, a body that is not a
// JSON object) pw is what the client sent as something else, which an
// error may quote back.
func passwordOnly(body, pw string) bool {
	var m map[string]any
	if json.Unmarshal([]byte(body), &m) != nil {
		return false
	}
	p, ok := m["Password"].(string)
	if !ok || !strings.Contains(p, pw) {
		return false
	}
	delete(m, "Password")
	rest, err := json.Marshal(m)
	return err == nil && !bytes.Contains(rest, []byte(pw))
}
