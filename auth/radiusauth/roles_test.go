package radiusauth_test

import (
	"errors"
	"testing"
	"time"

	"kvmd/auth/backend"
	"kvmd/auth/radiusauth"
	"kvmd/auth/radiusauth/radiustest"
)

// TestFilterIDRoles: against a real FreeRADIUS, the Filter-Id of the
// Access-Accept gives the role; an accept without a kvmd one is refused
// when roles come from RADIUS, and taken (no role) when they do not.
func TestFilterIDRoles(t *testing.T) {
	srv := radiustest.Start(t, radiustest.Config{
		Users:    map[string]string{"ann": "ann-pass", "ben": "ben-pass", "cat": "cat-pass", "dan": "dan-pass"},
		FilterID: map[string]string{"ann": "kvmd-admin", "ben": "kvmd-operator", "cat": "kvmd-viewer", "dan": "vlan-12"},
	})
	b := newBackend(t, radiusauth.Config{Server: srv.Addr, Secret: []byte(srv.Secret), Timeout: 2 * time.Second, FilterIDRoles: true})
	for user, want := range map[string]string{"ann": "admin", "ben": "operator", "cat": "viewer"} {
		if err := b.Verify(t.Context(), user, user+"-pass"); err != nil {
			t.Errorf("%s: %v", user, err)
			continue
		}
		if got, ok := b.Role(user); !ok || got != want {
			t.Errorf("%s: role %q %v, want %q", user, got, ok, want)
		}
	}
	if err := b.Verify(t.Context(), "dan", "dan-pass"); !errors.Is(err, backend.ErrRejected) {
		t.Errorf("dan, no kvmd Filter-Id: %v, want rejected", err)
	}
	plain := newBackend(t, radiusauth.Config{Server: srv.Addr, Secret: []byte(srv.Secret), Timeout: 2 * time.Second})
	if err := plain.Verify(t.Context(), "dan", "dan-pass"); err != nil {
		t.Errorf("dan without FilterIDRoles: %v", err)
	}
	if _, ok := plain.Role("ann"); ok {
		t.Errorf("a role without FilterIDRoles")
	}
}
