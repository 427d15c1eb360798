package redfish

import (
	"bytes"
	"context"
	"net/http/httptest"
	"net/netip"
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
			if rec.Code >= 500 || bytes.Contains(rec.Body.Bytes(), []byte("secret-pw")) {
				t.Fatalf("body %q: %d %s", body, rec.Code, rec.Body)
			}
		}
	})
}
