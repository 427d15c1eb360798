package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// session is a stored login.
type session struct {
	User    string    `json:"user"`
	Token   string    `json:"token"`
	Created time.Time `json:"created"`
}

// sessions is the file of stored sessions: a JSON object from device URL
// to session, mode 0600 in a 0700 directory, rewritten atomically (temp
// file and rename) under a lock, so that two kvmctl at once lose nothing.
type sessions struct{ path string }

var tokenRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

func sessionsPath(getenv func(string) string) string {
	d := homeDir(getenv, "XDG_STATE_HOME", filepath.Join(".local", "state"))
	if d == "" {
		return ""
	}
	return filepath.Join(d, "kvmctl", "sessions.json")
}

func parseSessions(data []byte) (map[string]session, error) {
	m := map[string]session{}
	if len(data) == 0 {
		return m, nil
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// get returns the session stored for url. A token that is not a token is
// no session.
func (s sessions) get(url string) (session, bool, error) {
	if s.path == "" {
		return session{}, false, nil
	}
	data, err := os.ReadFile(s.path)
	if os.IsNotExist(err) {
		return session{}, false, nil
	}
	if err != nil {
		return session{}, false, fmt.Errorf("reading sessions: %w", err)
	}
	m, err := parseSessions(data)
	if err != nil {
		return session{}, false, fmt.Errorf("reading sessions %s: %w", s.path, err)
	}
	sess, ok := m[url]
	return sess, ok && tokenRE.MatchString(sess.Token), nil
}

// update changes the entry of url: sess, or none when sess is nil.
func (s sessions) update(url string, sess *session) error {
	if s.path == "" {
		return fmt.Errorf("no place to keep sessions: neither XDG_STATE_HOME nor HOME is set")
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("storing the session: %w", err)
	}
	err := updateFile(s.path, 0o600, func(old []byte) ([]byte, error) {
		m, err := parseSessions(old)
		if err != nil {
			m = map[string]session{} // a broken file is replaced
		}
		if sess == nil {
			delete(m, url)
		} else {
			m[url] = *sess
		}
		b, err := json.MarshalIndent(m, "", "  ")
		return append(b, '\n'), err
	})
	if err != nil {
		return fmt.Errorf("storing the session in %s: %w", s.path, err)
	}
	// An existing file keeps its group permissions through atomicfile:
	// tokens are the owner's alone.
	return os.Chmod(s.path, 0o600)
}
