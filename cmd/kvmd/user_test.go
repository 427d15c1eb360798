package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"kvmd/auth"
)

// kvmdBin is the kvmd binary built once for the package's tests: the demo
// build (-tags demo), which is the release build plus --demo.
var kvmdBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	kvmdBin = filepath.Join(dir, "kvmd")
	build := exec.Command("go", "build", "-tags", "demo", "-o", kvmdBin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kvmd: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runKvmd runs the real binary with stdin and returns its output.
func runKvmd(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := exec.Command(kvmdBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// userRun runs userCmd in process.
func userRun(stdin string, args ...string) (stdout, stderr string, err error) {
	var o, e bytes.Buffer
	err = userCmd(args, strings.NewReader(stdin), &o, &e)
	return o.String(), e.String(), err
}

// checkPasswd fails unless user's entry in the users file verifies passwd
// and not a near miss.
func checkPasswd(t *testing.T, path, user, passwd string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := auth.ParseHtpasswd(data)
	text, ok := f.Lookup(user)
	if !ok {
		t.Fatalf("no user %q in %q", user, data)
	}
	h, err := auth.ParseHash(text)
	if err != nil {
		t.Fatalf("hash of %s: %v", user, err)
	}
	if !h.Verify(passwd) {
		t.Errorf("password of %s does not verify", user)
	}
	if h.Verify(passwd + "x") {
		t.Errorf("a wrong password of %s verifies", user)
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != want {
		t.Errorf("mode of %s = %v, want %v", path, fi.Mode().Perm(), want)
	}
}

func listOf(t *testing.T, path string) []string {
	t.Helper()
	out, _, err := userRun("", "list", "--users", path)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	return strings.Fields(out)
}

func TestUserRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	steps := []struct {
		name   string
		stdin  string
		args   []string
		users  []string
		passwd map[string]string
	}{
		{"add creates the file", "alice-pw\n", []string{"add", "alice", "--users", path},
			[]string{"alice"}, map[string]string{"alice": "alice-pw"}},
		{"flags before the name, colon, CRLF", "pass:word with spaces\r\n", []string{"add", "--users", path, "bob"},
			[]string{"alice", "bob"}, map[string]string{"bob": "pass:word with spaces"}},
		{"set changes a password", "new:pw", []string{"set", "alice", "--users=" + path},
			[]string{"alice", "bob"}, map[string]string{"alice": "new:pw", "bob": "pass:word with spaces"}},
		{"set creates", "carol-pw\nignored second line\n", []string{"set", "-users", path, "carol"},
			[]string{"alice", "bob", "carol"}, map[string]string{"carol": "carol-pw"}},
		{"del", "", []string{"del", "bob", "--users", path},
			[]string{"alice", "carol"}, map[string]string{"alice": "new:pw", "carol": "carol-pw"}},
		{"name after --", "dave-pw\n", []string{"add", "--users", path, "--", "dave"},
			[]string{"alice", "carol", "dave"}, map[string]string{"dave": "dave-pw"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			out, _, err := userRun(s.stdin, s.args...)
			if err != nil {
				t.Fatalf("kvmd user %q: %v", s.args, err)
			}
			if out != "" {
				t.Errorf("stdout = %q, want nothing", out)
			}
			if got := listOf(t, path); !slices.Equal(got, s.users) {
				t.Errorf("list = %q, want %q", got, s.users)
			}
			for u, p := range s.passwd {
				checkPasswd(t, path, u, p)
			}
			checkMode(t, path, 0o600)
		})
	}
}

func TestUserErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "htpasswd")
	const initial = "# keep me\nalice:$2y$04$p3MM4R.pqWc06kO1T/be3exmQrYUBiVfoqfa5lmUnCZK361vImKJa\n"
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string // in the error
	}{
		{"no subcommand", "", nil, "missing subcommand"},
		{"unknown subcommand", "", []string{"rename", "alice", "--users", path}, `unknown subcommand "rename"`},
		{"no --users", "pw\n", []string{"add", "bob"}, "--users FILE is required"},
		{"empty --users", "pw\n", []string{"add", "bob", "--users", ""}, "--users FILE is required"},
		{"unknown flag", "pw\n", []string{"add", "bob", "--user", path}, "flag provided but not defined"},
		{"no name", "pw\n", []string{"add", "--users", path}, "want exactly one user NAME, got 0"},
		{"two names", "pw\n", []string{"set", "bob", "carol", "--users", path}, "got 2"},
		{"list with a name", "", []string{"list", "alice", "--users", path}, `unexpected argument "alice"`},
		{"invalid name", "pw\n", []string{"add", "Bob", "--users", path}, "user name may hold only"},
		{"name too long", "pw\n", []string{"add", strings.Repeat("b", 129), "--users", path}, "longer than 128"},
		{"add existing", "pw\n", []string{"add", "alice", "--users", path}, `user "alice" already exists`},
		{"del missing", "", []string{"del", "bob", "--users", path}, `no user "bob"`},
		{"empty password", "\n", []string{"set", "bob", "--users", path}, "empty password refused"},
		{"no stdin", "", []string{"set", "bob", "--users", path}, "empty password refused"},
		{"control character", "pw\tx\n", []string{"set", "bob", "--users", path}, "printable ASCII"},
		{"non-ASCII", "pässword\n", []string{"set", "bob", "--users", path}, "printable ASCII"},
		{"over 512", strings.Repeat("p", 513) + "\n", []string{"set", "bob", "--users", path}, "longer than 512"},
		{"no newline, over the read limit", strings.Repeat("p", 5000), []string{"set", "bob", "--users", path}, "longer than 512"},
		{"over bcrypt's 72", strings.Repeat("p", 73) + "\n", []string{"set", "bob", "--users", path}, "longer than 72 bytes"},
		{"directory missing", "pw\n", []string{"set", "bob", "--users", filepath.Join(dir, "nope", "f")}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(path, []byte(initial), 0o644); err != nil {
				t.Fatal(err)
			}
			before, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = userRun(tt.stdin, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "pppp") {
				t.Errorf("error %q quotes the password", err)
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != initial {
				t.Errorf("file changed (-want +got):\n-%q\n+%q", initial, data)
			}
			after, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if !os.SameFile(before, after) {
				t.Error("the file was replaced")
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 1 {
				t.Errorf("directory holds %d entries, want only the users file", len(ents))
			}
		})
	}
}

func TestUserListMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none")
	_, _, err := userRun("", "list", "--users", path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("list of a missing file = %v, want fs.ErrNotExist", err)
	}
	_, _, err = userRun("", "del", "alice", "--users", path)
	if err == nil {
		t.Error("del in a missing file succeeded")
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("del created the file: %v", err)
	}
}

func TestUserHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"add", "-h"}, {"list", "--help"}} {
		_, stderr, err := userRun("", args...)
		if !errors.Is(err, flag.ErrHelp) {
			t.Errorf("user %q = %v, want flag.ErrHelp", args, err)
		}
		if !strings.Contains(stderr, "usage: kvmd user") {
			t.Errorf("user %q printed %q, want the usage", args, stderr)
		}
	}
}

// TestUserKeepsOtherLines edits a file holding comments, blank lines,
// CRLF lines, malformed lines and a duplicate: only the edited line may
// change, and the malformed lines are reported without their content.
func TestUserKeepsOtherLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	const (
		head = "# PiKVM users\r\n" +
			"\n" +
			"admin:{SSHA512}tsuSAAmiJyNdQCBUPn1hqss4JzmksNwvXbxzONKhJXUwXcHXOt7v7E5yNmZ2o68Y4aGZdr1E4Wf5o3xPGPX4b2eQ3u34bnFs\r\n" +
			"  # indented comment with a : colon\n" +
			"this is not an entry secret-garbage\n"
		alice = "alice:$apr1$6xVU1bEn$7SVXYqBWKYQ/3EGXLHPay1\n"
		tail  = "Weird:Name:x\n" +
			"admin:{SHA}duplicate-ignored\n" +
			"\t\n" +
			"# last line without newline"
	)
	if err := os.WriteFile(path, []byte(head+alice+tail), 0o600); err != nil {
		t.Fatal(err)
	}

	_, stderr, err := userRun("alice-new\n", "set", "alice", "--users", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"line 5:", "line 7:", "line 8:"} {
		if !strings.Contains(stderr, line) {
			t.Errorf("warnings %q do not mention %s", stderr, line)
		}
	}
	if strings.Contains(stderr, "secret-garbage") || strings.Contains(stderr, "duplicate-ignored") {
		t.Errorf("warnings %q quote the file", stderr)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(data)
	if !strings.HasPrefix(got, head+"alice:$2a$10$") || !strings.HasSuffix(got, "\n"+tail+"\n") {
		t.Errorf("other lines changed (-want +got):\n-%q\n+%q", head+alice+tail+"\n", got)
	}
	checkPasswd(t, path, "alice", "alice-new")
	checkMode(t, path, 0o600)

	// A new user goes at the end; deleting it restores the file.
	before := data
	if _, _, err := userRun("zed-pw\n", "add", "zed", "--users", path); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if !bytes.HasPrefix(data, before) || !bytes.HasPrefix(data[len(before):], []byte("zed:$2a$")) {
		t.Errorf("add did not append:\n%q", data)
	}
	if _, _, err := userRun("", "del", "zed", "--users", path); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); !bytes.Equal(data, before) {
		t.Errorf("add then del changed the file (-want +got):\n-%q\n+%q", before, data)
	}
	// Deleting admin removes its duplicate too, so that it cannot take over.
	if _, _, err := userRun("", "del", "admin", "--users", path); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if bytes.Contains(data, []byte("admin:")) {
		t.Errorf("an admin line survived del:\n%q", data)
	}
	if !bytes.Contains(data, []byte("this is not an entry secret-garbage\n")) {
		t.Errorf("del dropped a malformed line:\n%q", data)
	}
}

// TestUserBinary runs the real binary: a non-terminal stdin, the exit
// status and the message on stderr.
func TestUserBinary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	if _, stderr, err := runKvmd(t, "p:w d\r\n", "user", "add", "admin", "--users", path); err != nil {
		t.Fatalf("add: %v\n%s", err, stderr)
	}
	checkPasswd(t, path, "admin", "p:w d")
	checkMode(t, path, 0o600)
	before, _ := os.ReadFile(path)

	_, stderr, err := runKvmd(t, "other\n", "user", "add", "admin", "--users", path)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("add of an existing user: %v, want exit status 1", err)
	}
	if !strings.Contains(stderr, "already exists") {
		t.Errorf("stderr = %q", stderr)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("failed add changed the file")
	}
	out, _, err := runKvmd(t, "", "user", "list", "--users", path)
	if err != nil || out != "admin\n" {
		t.Errorf("list = %q, %v; want \"admin\\n\"", out, err)
	}
}

// TestUserConcurrent runs 16 "kvmd user set" processes on one file at once:
// none may lose another's entry.
func TestUserConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "htpasswd")
	const comment = "# shared by 16 writers\n"
	if err := os.WriteFile(path, []byte(comment), 0o600); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			cmd := exec.Command(kvmdBin, "user", "set", fmt.Sprintf("user%d", i), "--users", path)
			cmd.Stdin = strings.NewReader(fmt.Sprintf("password-%d\n", i))
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("user%d: %v", i, err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte(comment)) {
		t.Errorf("comment lost:\n%q", data)
	}
	f, perrs := auth.ParseHtpasswd(data)
	if len(perrs) != 0 {
		t.Errorf("file has errors: %q", perrs)
	}
	users := f.Users()
	slices.Sort(users)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("user%d", i))
	}
	slices.Sort(want)
	if !slices.Equal(users, want) {
		t.Fatalf("users = %q, want %q", users, want)
	}
	for i := range n {
		checkPasswd(t, path, fmt.Sprintf("user%d", i), fmt.Sprintf("password-%d", i))
	}
	checkMode(t, path, 0o600)
}

// openPTY opens a pseudo-terminal pair, or skips the test where there is
// none.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlocking pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("pty number: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("opening pty: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestUserPrompt types the password at a real terminal: it is asked twice,
// never echoed, and a mismatch is refused.
func TestUserPrompt(t *testing.T) {
	tests := []struct {
		name, typed string
		wantErr     string
	}{
		{"match", "typed:secret\ntyped:secret\n", ""},
		{"mismatch", "typed:secret\ntyped:secreT\n", "do not match"},
		{"empty", "\n\n", "empty password refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			master, slave := openPTY(t)
			path := filepath.Join(t.TempDir(), "htpasswd")
			cmd := exec.Command(kvmdBin, "user", "set", "alice", "--users", path)
			cmd.Stdin, cmd.Stderr = slave, slave
			var stdout bytes.Buffer
			cmd.Stdout = &stdout
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var screen bytes.Buffer
			read := make(chan struct{})
			go func() {
				defer close(read)
				buf := make([]byte, 4096)
				for {
					n, err := master.Read(buf)
					screen.Write(buf[:n])
					if err != nil {
						return
					}
				}
			}()
			// Type only once echo is off, as a person would after the
			// prompt; both lines go in at once, the second one waits in the
			// terminal's buffer.
			deadline := time.Now().Add(10 * time.Second)
			for {
				tio, err := unix.IoctlGetTermios(int(slave.Fd()), unix.TCGETS)
				if err != nil {
					t.Fatal(err)
				}
				if tio.Lflag&unix.ECHO == 0 {
					break
				}
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					t.Fatal("echo never turned off")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if _, err := master.Write([]byte(tt.typed)); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			slave.Close()
			<-read
			shown := screen.String()
			if strings.Contains(shown, "typed") {
				t.Errorf("the password was echoed: %q", shown)
			}
			if !strings.Contains(shown, "Password: ") || !strings.Contains(shown, "Repeat password: ") {
				t.Errorf("screen = %q, want both prompts", shown)
			}
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("set: %v\n%s", err, shown)
				}
				checkPasswd(t, path, "alice", "typed:secret")
				return
			}
			if err == nil || !strings.Contains(shown, tt.wantErr) {
				t.Errorf("set = %v, screen %q; want an error saying %q", err, shown, tt.wantErr)
			}
			if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a refused password wrote the file: %v", err)
			}
		})
	}
}

func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		args      []string
		wantPos   []string
		wantUsers string
	}{
		{[]string{"a", "--users", "f"}, []string{"a"}, "f"},
		{[]string{"--users", "f", "a"}, []string{"a"}, "f"},
		{[]string{"a", "--users=f", "b"}, []string{"a", "b"}, "f"},
		{[]string{"--", "--users", "f"}, []string{"--users", "f"}, ""},
		{[]string{"a", "--", "-b"}, []string{"a", "-b"}, ""},
		{nil, nil, ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			fset := flag.NewFlagSet("t", flag.ContinueOnError)
			users := fset.String("users", "", "")
			pos, err := parseInterleaved(fset, tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(pos, tt.wantPos) || *users != tt.wantUsers {
				t.Errorf("= %q, users %q; want %q, users %q", pos, *users, tt.wantPos, tt.wantUsers)
			}
		})
	}
}
