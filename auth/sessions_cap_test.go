package auth

import (
	"errors"
	"strconv"
	"testing"
	"time"
)

// TestSessionsPerUser: one user's logins never end another user's
// session; past MaxPerUser, that user's least recently used session ends.
func TestSessionsPerUser(t *testing.T) {
	s := &Sessions{Max: 4096, MaxPerUser: 64}
	now := time.Unix(1_700_000_000, 0)
	bob, _, err := s.New("bob", 0, now)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for i := range 4100 {
		tok, _, err := s.New("alice", 0, now.Add(time.Duration(i+1)*time.Millisecond))
		if err != nil {
			t.Fatalf("alice's login %d: %v", i+1, err)
		}
		if i == 0 {
			first = tok
		}
	}
	if u, ok := s.Check(bob, now.Add(5*time.Second)); !ok || u != "bob" {
		t.Error("alice's 4100 logins ended bob's session")
	}
	if _, ok := s.Check(first, now.Add(5*time.Second)); ok {
		t.Error("alice's first session survived 4099 later ones")
	}
	if n := s.Len(); n != 65 {
		t.Errorf("%d sessions held, want 64 of alice's and bob's", n)
	}
}

// TestSessionsLeastRecentlyUsed: the session that goes is the one unused
// longest (a script's forgotten logins before a browser's live session).
func TestSessionsLeastRecentlyUsed(t *testing.T) {
	s := &Sessions{Max: 100, MaxPerUser: 3}
	now := time.Unix(1_700_000_000, 0)
	at := func(sec int) time.Time { return now.Add(time.Duration(sec) * time.Second) }
	browser, _, _ := s.New("admin", 0, at(0))
	script1, _, _ := s.New("admin", 0, at(1))
	script2, _, _ := s.New("admin", 0, at(2))
	s.Check(browser, at(3)) // in use
	s.New("admin", 0, at(4))
	if _, ok := s.Check(browser, at(5)); !ok {
		t.Error("the session in use ended")
	}
	if _, ok := s.Check(script1, at(5)); ok {
		t.Error("the session unused longest survived")
	}
	if _, ok := s.Check(script2, at(5)); !ok {
		t.Error("a session younger than the one unused longest ended")
	}
}

// TestSessionsTotalBound: at Max, a user with sessions loses their own
// least recently used one; a user without any is refused, never
// evicting someone else's.
func TestSessionsTotalBound(t *testing.T) {
	s := &Sessions{Max: 20, MaxPerUser: 10}
	now := time.Unix(1_700_000_000, 0)
	toks := map[string]string{}
	for i := range 20 {
		u := "u" + strconv.Itoa(i)
		tok, _, err := s.New(u, 0, now)
		if err != nil {
			t.Fatal(err)
		}
		toks[u] = tok
	}
	if _, _, err := s.New("newcomer", 0, now); !errors.Is(err, ErrTooManySessions) {
		t.Errorf("a new user at the bound: %v, want ErrTooManySessions", err)
	}
	if _, _, err := s.New("u3", 0, now.Add(time.Second)); err != nil {
		t.Errorf("u3 at the bound: %v", err)
	}
	if _, ok := s.Check(toks["u3"], now.Add(time.Second)); ok {
		t.Error("u3's older session survived its new one at the bound")
	}
	for u, tok := range toks {
		if _, ok := s.Check(tok, now.Add(time.Second)); !ok && u != "u3" {
			t.Errorf("%s's session ended by another user's login", u)
		}
	}
	// Dead sessions make room first.
	s.Idle = time.Minute
	if _, _, err := s.New("newcomer", 0, now.Add(2*time.Minute)); err != nil {
		t.Errorf("after every session idled out: %v", err)
	}
	if n := s.Len(); n != 1 {
		t.Errorf("%d sessions held after the sweep, want 1", n)
	}
}
