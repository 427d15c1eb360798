package daemon

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStreamerDir: the socket's directory is --streamer-dir, else systemd's
// RuntimeDirectory= (the ustreamer one of several), else a temporary one
// removed at the end (the socket in it is the streamer's); each the daemon's user's alone.
func TestStreamerDir(t *testing.T) {
	base := t.TempDir()
	for _, tt := range []struct {
		name, flag, env, want string
	}{
		{"flag", filepath.Join(base, "flag"), filepath.Join(base, "env"), filepath.Join(base, "flag")},
		{"systemd", "", filepath.Join(base, "rt"), filepath.Join(base, "rt")},
		{"systemd, several", "", filepath.Join(base, "a") + ":" + filepath.Join(base, "kvmd/ustreamer") + ":" + filepath.Join(base, "b"), filepath.Join(base, "kvmd/ustreamer")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("RUNTIME_DIRECTORY", tt.env)
			dir, cleanup, err := streamerDir(tt.flag)
			if err != nil || dir != tt.want {
				t.Fatalf("streamerDir: %q %v, want %q", dir, err, tt.want)
			}
			if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v %v, want a 0700 directory", dir, fi.Mode(), err)
			}
			cleanup()
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("the cleanup removed %s, which is not the daemon's to remove", dir)
			}
		})
	}
	t.Setenv("RUNTIME_DIRECTORY", "")
	dir, cleanup, err := streamerDir("")
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, want a 0700 directory", dir, err)
	}
	cleanup()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the temporary directory %s outlived the cleanup: %v", dir, err)
	}
}
