package auth

import (
	"strings"
	"testing"
	"time"
)

func TestValidToken(t *testing.T) {
	tests := []struct {
		tok string
		ok  bool
	}{
		{strings.Repeat("a1", 32), true},
		{strings.Repeat("A1", 32), false},
		{strings.Repeat("a", 63), false},
		{strings.Repeat("a", 65), false},
		{strings.Repeat("g", 64), false},
		{"", false},
	}
	for _, tt := range tests {
		if got := ValidToken(tt.tok) == nil; got != tt.ok {
			t.Errorf("ValidToken(%q) ok = %v, want %v", tt.tok, got, tt.ok)
		}
	}
}

func TestSessions(t *testing.T) {
	s := &Sessions{Lifetime: time.Hour, Max: 3}
	now := time.Unix(1_700_000_000, 0)
	tok, life, err := s.New("admin", 0, now)
	if err != nil || ValidToken(tok) != nil || life != time.Hour {
		t.Fatalf("New: %q %s %v", tok, life, err)
	}
	if u, ok := s.Check(tok, now); !ok || u != "admin" {
		t.Fatalf("Check: %q %v", u, ok)
	}
	// A token that differs in its last digit is another token.
	other := tok[:63] + string("0123456789abcdef"[(strings.IndexByte("0123456789abcdef", tok[63])+1)%16])
	if _, ok := s.Check(other, now); ok {
		t.Error("a neighbouring token is accepted")
	}
	// Distinct creation times: the bound below drops the oldest.
	if _, life, _ := s.New("admin", 10*time.Minute, now.Add(1)); life != 10*time.Minute {
		t.Errorf("expire 10m gives lifetime %s", life)
	}
	if _, life, _ := s.New("admin", 2*time.Hour, now.Add(2)); life != time.Hour {
		t.Errorf("expire 2h lengthened the lifetime to %s", life)
	}
	// A fourth session of the same user pushes out its least recently
	// used one; another user's login at the bound is refused
	// (sessions_cap_test.go).
	newest, _, _ := s.New("admin", 0, now.Add(time.Second))
	if n := s.Len(); n != 3 {
		t.Errorf("%d sessions held, bound is 3", n)
	}
	if _, ok := s.Check(tok, now.Add(time.Second)); ok {
		t.Error("the least recently used session survived the bound")
	}
	if _, ok := s.Check(newest, now.Add(time.Second)); !ok {
		t.Error("the newest session was dropped")
	}
	if n := s.EndUser("admin"); n != 3 {
		t.Errorf("EndUser ended %d sessions, want 3", n)
	}
	newest, _, _ = s.New("viewer", 0, now.Add(time.Second))
	if !s.End(newest) || s.End(newest) {
		t.Error("End: want true once, then false")
	}

	unlimited := &Sessions{}
	tok, life, _ = unlimited.New("admin", 0, now)
	if life != 0 {
		t.Errorf("no lifetime configured gives %s", life)
	}
	if _, ok := unlimited.Check(tok, now.Add(10000*time.Hour)); !ok {
		t.Error("a session without limits ended")
	}
}
