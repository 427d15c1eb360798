package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// listDir returns the names in dir, to catch temporary files left behind.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func checkFile(t *testing.T, path string, want []byte, perm fs.FileMode) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("content of %s = %q, want %q", path, got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != perm {
		t.Errorf("mode of %s = %v, want %v", path, fi.Mode().Perm(), perm)
	}
}

func TestWrite(t *testing.T) {
	tests := []struct {
		name  string
		old   []byte // nil: no file before
		oldP  fs.FileMode
		data  []byte
		perm  fs.FileMode
		wantP fs.FileMode
	}{
		{name: "new file", data: []byte("hello\n"), perm: 0o600, wantP: 0o600},
		// The umask (022 or stricter in tests) must not apply.
		{name: "new file, group writable", data: []byte("x"), perm: 0o664, wantP: 0o664},
		{name: "replace", old: []byte("old content that is longer\n"), oldP: 0o600, data: []byte("new\n"), perm: 0o600, wantP: 0o600},
		// root:kvmd 0640 stays readable by the service's group.
		{name: "replace keeps group read", old: []byte("old"), oldP: 0o640, data: []byte("new"), perm: 0o600, wantP: 0o640},
		{name: "replace drops world read", old: []byte("old"), oldP: 0o644, data: []byte("new"), perm: 0o600, wantP: 0o640},
		{name: "replace tightens world write", old: []byte("old"), oldP: 0o666, data: []byte("new"), perm: 0o600, wantP: 0o660},
		{name: "empty", old: []byte("something"), oldP: 0o600, data: []byte{}, perm: 0o600, wantP: 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "f")
			if tt.old != nil {
				if err := os.WriteFile(path, tt.old, 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(path, tt.oldP); err != nil {
					t.Fatal(err)
				}
			}
			if err := Write(path, tt.data, tt.perm); err != nil {
				t.Fatalf("Write: %v", err)
			}
			checkFile(t, path, tt.data, tt.wantP)
			if got := listDir(t, dir); len(got) != 1 || got[0] != "f" {
				t.Errorf("directory holds %q, want only f", got)
			}
		})
	}
}

func TestWriteRelative(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := Write("rel", []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, "rel"), []byte("x"), 0o600)
}

func TestWriteErrorLeavesNoTrace(t *testing.T) {
	t.Run("target is a directory", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "d")
		if err := os.Mkdir(path, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(path, "inside"), []byte("keep"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Write(path, []byte("x"), 0o600); err == nil {
			t.Fatal("Write over a non-empty directory succeeded")
		}
		if got := listDir(t, dir); len(got) != 1 || got[0] != "d" {
			t.Errorf("directory holds %q, want only d", got)
		}
		checkFile(t, filepath.Join(path, "inside"), []byte("keep"), 0o600)
	})
	t.Run("missing directory", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope", "f")
		err := Write(path, []byte("x"), 0o600)
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Write = %v, want an error wrapping fs.ErrNotExist", err)
		}
	})
}

func TestWriteKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file away")
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	const uid, gid = 4321, 8765
	if err := os.Chown(path, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != uid || st.Gid != gid {
		t.Errorf("owner = %d:%d, want %d:%d", st.Uid, st.Gid, uid, gid)
	}
	checkFile(t, path, []byte("new"), 0o600)

	// A new file belongs to whoever writes it.
	path2 := filepath.Join(filepath.Dir(path), "g")
	if err := Write(path2, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err = os.Stat(path2)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
		t.Errorf("new file owned by uid %d, want 0", st.Uid)
	}
}

func TestWriteFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sub", "link")
	if err := os.WriteFile(real, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../real", link); err != nil {
		t.Fatal(err)
	}
	if err := Write(link, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(link)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("link replaced by a %v", fi.Mode())
	}
	checkFile(t, real, []byte("new"), 0o600)

	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink("created", dangling); err != nil {
		t.Fatal(err)
	}
	if err := Write(dangling, []byte("via link"), 0o600); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(dir, "created"), []byte("via link"), 0o600)
}

// TestWriteReaderSeesWholeFiles reads the file while it is rewritten with
// two different contents: every read must return one of them entirely.
func TestWriteReaderSeesWholeFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	a := bytes.Repeat([]byte("a"), 256<<10)
	b := bytes.Repeat([]byte("b"), 128<<10)
	if err := Write(path, a, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for i := range 50 {
			data := a
			if i%2 == 0 {
				data = b
			}
			if err := Write(path, data, 0o600); err != nil {
				t.Error(err)
				return
			}
		}
	})
	reads := 0
	for {
		select {
		case <-done:
			wg.Wait()
			if reads == 0 {
				t.Error("no read happened during the writes")
			}
			return
		default:
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		reads++
		if !bytes.Equal(got, a) && !bytes.Equal(got, b) {
			t.Fatalf("read a mix of %d bytes", len(got))
		}
	}
}

func TestUpdate(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")

	var seen [][]byte
	appendX := func(old []byte) ([]byte, error) {
		seen = append(seen, old)
		return append(bytes.Clone(old), 'x'), nil
	}
	if err := Update(path, 0o600, appendX); err != nil {
		t.Fatal(err)
	}
	if err := Update(path, 0o600, appendX); err != nil {
		t.Fatal(err)
	}
	if seen[0] != nil {
		t.Errorf("first old = %q, want nil for a missing file", seen[0])
	}
	if string(seen[1]) != "x" {
		t.Errorf("second old = %q, want %q", seen[1], "x")
	}
	checkFile(t, path, []byte("xx"), 0o600)

	errStop := errors.New("stop")
	err := Update(path, 0o600, func(old []byte) ([]byte, error) { return []byte("lost"), errStop })
	if err != errStop {
		t.Errorf("Update = %v, want fn's error unchanged", err)
	}
	checkFile(t, path, []byte("xx"), 0o600)

	missing := filepath.Join(dir, "missing")
	if err := Update(missing, 0o600, func([]byte) ([]byte, error) { return nil, errStop }); err != errStop {
		t.Errorf("Update = %v, want %v", err, errStop)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("aborted Update created the file: %v", err)
	}
	if got := listDir(t, dir); len(got) != 1 {
		t.Errorf("directory holds %q, want only f", got)
	}

	if err := Update(filepath.Join(dir, "nodir", "f"), 0o600, appendX); err == nil {
		t.Error("Update in a missing directory succeeded")
	}
}

// increment adds one to the decimal number in path under Update, with a
// pause between read and write that invites lost updates if the lock fails.
func increment(path string) error {
	return Update(path, 0o600, func(old []byte) ([]byte, error) {
		n := 0
		if old != nil {
			var err error
			if n, err = strconv.Atoi(string(old)); err != nil {
				return nil, err
			}
		}
		for range 1000 {
			syscall.Getpid() // yield a little without sleeping
		}
		return []byte(strconv.Itoa(n + 1)), nil
	})
}

func TestUpdateGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "counter")
	const workers, each = 8, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if err := increment(path); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	checkFile(t, path, []byte(strconv.Itoa(workers*each)), 0o600)
}

const helperEnv = "ATOMICFILE_TEST_INCREMENT"

// TestUpdateProcesses runs several copies of the test binary that increment
// one counter file: the directory lock must order them across processes.
func TestUpdateProcesses(t *testing.T) {
	if path := os.Getenv(helperEnv); path != "" {
		for range 20 {
			if err := increment(path); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
		}
		return
	}
	path := filepath.Join(t.TempDir(), "counter")
	const procs = 6
	var cmds []*exec.Cmd
	for range procs {
		cmd := exec.Command(os.Args[0], "-test.run=^TestUpdateProcesses$")
		cmd.Env = append(os.Environ(), helperEnv+"="+path)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, cmd)
	}
	for _, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("helper: %v", err)
		}
	}
	checkFile(t, path, []byte(strconv.Itoa(procs*20)), 0o600)
}
