package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

const journalSocket = "/run/systemd/journal/socket"

// parseJournalDatagram decodes journald's native protocol: KEY=value lines,
// and KEY\n<64-bit little-endian length><value>\n for values with newlines.
func parseJournalDatagram(b []byte) (map[string]string, error) {
	m := map[string]string{}
	for len(b) > 0 {
		nl := bytes.IndexByte(b, '\n')
		if nl < 0 {
			return nil, errors.New("unterminated field")
		}
		line := b[:nl]
		if k, v, ok := bytes.Cut(line, []byte("=")); ok {
			m[string(k)] = string(v)
			b = b[nl+1:]
			continue
		}
		rest := b[nl+1:]
		if len(rest) < 8 {
			return nil, errors.New("short binary field")
		}
		n := binary.LittleEndian.Uint64(rest)
		if uint64(len(rest)-8) < n+1 {
			return nil, errors.New("binary field past the datagram")
		}
		m[string(line)] = string(rest[8 : 8+n])
		b = rest[8+n+1:]
	}
	return m, nil
}

// TestJournalLogging runs the daemon as systemd would with its stderr
// connected to the journal, and reads what it sends to journald's socket.
// No journald runs here, so the test binds that socket itself, only when
// nothing else has it.
func TestJournalLogging(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("binding journald's socket path needs root")
	}
	if _, err := os.Stat(journalSocket); err == nil {
		t.Skip("a journald is running here; not taking its socket")
	} else if !errors.Is(err, fs.ErrNotExist) {
		t.Skip(err)
	}
	var made []string
	for _, d := range []string{"/run/systemd", "/run/systemd/journal"} {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Skip(err)
			}
			made = append([]string{d}, made...)
		}
	}
	t.Cleanup(func() {
		os.Remove(journalSocket)
		for _, d := range made {
			os.Remove(d)
		}
	})
	jc, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: journalSocket, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer jc.Close()
	entries := make(chan map[string]string, 100)
	go func() {
		buf := make([]byte, 1<<16)
		for {
			n, err := jc.Read(buf)
			if err != nil {
				close(entries)
				return
			}
			m, perr := parseJournalDatagram(buf[:n])
			if perr != nil {
				m = map[string]string{"PARSE_ERROR": perr.Error()}
			}
			entries <- m
		}
	}()

	users := usersFile(t, "admin", "pw")
	// JOURNAL_STREAM names the device and inode of the stream stderr is
	// connected to: here a file.
	errPath := filepath.Join(t.TempDir(), "stderr")
	ef, err := os.Create(errPath)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(ef.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	addr := testutil.FreeAddr(t)
	cmd := exec.Command(kvmdBin, "serve", "--users", users, "--listen", addr)
	cmd.Env = append(os.Environ(), fmt.Sprintf("JOURNAL_STREAM=%d:%d", st.Dev, st.Ino))
	cmd.Stderr = ef
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()

	want := func(pred func(map[string]string) bool, what string) map[string]string {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			select {
			case m := <-entries:
				if pred(m) {
					return m
				}
			case <-deadline:
				t.Fatalf("no journal entry %s", what)
			}
		}
	}
	want(func(m map[string]string) bool { return strings.HasPrefix(m["MESSAGE"], "kvmd listening") }, "kvmd listening")
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/auth/check", nil)
	req.SetBasicAuth("admin", "wrong")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	m := want(func(m map[string]string) bool { return strings.HasPrefix(m["MESSAGE"], "auth failed") }, "auth failed")
	for k, v := range map[string]string{
		"PRIORITY": "4", "KVMD_USER": "admin", "KVMD_METHOD": "basic", "KVMD_ADDR": "127.0.0.1", "KVMD_COMPONENT": "auth",
	} {
		if m[k] != v {
			t.Errorf("%s = %q, want %q (entry %q)", k, m[k], v, m)
		}
	}
	if !strings.Contains(m["MESSAGE"], "user=admin method=basic addr=127.0.0.1") {
		t.Errorf("MESSAGE %q does not read as a sentence with its fields", m["MESSAGE"])
	}
	if out, _ := os.ReadFile(errPath); len(out) != 0 {
		t.Errorf("logs went to stderr as well as the journal: %q", out)
	}
}
