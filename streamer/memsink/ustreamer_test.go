package memsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/jpeg"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// TestUstreamer reads the raw sink of Debian's ustreamer 4.9 run without
// a capture device: its "NO SIGNAL" JPEG (640x480, offline), put once a
// second while ustreamer waits for the device. ustreamer puts a frame
// with the same metadata only while a client has said it read within
// --raw-sink-client-ttl (1 s here), so new frames coming prove the
// reader's last_client_ts is now on ustreamer's clock, and frames
// stopping once it stops reading prove it is not in the future either.
// The booted test reads the same sink with vivid's frames on arm64.
func TestUstreamer(t *testing.T) {
	path := testutil.NeedTool(t, "ustreamer", "ustreamer")
	name := fmt.Sprintf("kvmd-memsink-test-%d", os.Getpid())
	dir := t.TempDir()
	// SIGTERM: ustreamer removes its sink (--raw-sink-rm) as it ends.
	// Cleanups run last first: the sink removed after ustreamer ended.
	t.Cleanup(func() { os.Remove("/dev/shm/" + name) })
	out := testutil.Start(t, exec.Command(path, "--device=/dev/kvmd-memsink-test-none", "--raw-sink="+name, "--raw-sink-rm",
		"--raw-sink-client-ttl=1", "--unix="+filepath.Join(dir, "s"), "--unix-rm", "--no-log-colors"), syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var r *Reader
	for {
		var err error
		if r, err = Open(name, Options{}); err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || ctx.Err() != nil {
			t.Fatalf("opening the sink: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer r.Close()

	var ids []uint64
	var buf []byte
	for len(ids) < 3 {
		f, err := r.Next(ctx, buf)
		if err != nil {
			t.Fatalf("after %d frames: %v\n%s", len(ids), err, out.String())
		}
		buf = f.Data
		if f.FourCC() != "JPEG" || f.Width != 640 || f.Height != 480 || f.Online || !f.Grab.IsZero() {
			t.Fatalf("frame %+v: want ustreamer's offline 640x480 JPEG", f)
		}
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(f.Data))
		if err != nil || cfg.Width != 640 || cfg.Height != 480 {
			t.Fatalf("the placeholder does not decode as a 640x480 JPEG: %+v %v", cfg, err)
		}
		if len(ids) > 0 && f.ID == ids[len(ids)-1] {
			t.Fatalf("frame id %d twice", f.ID)
		}
		ids = append(ids, f.ID)
	}
	t.Logf("frames %x", ids)

	// The reader stops looking: within the TTL and a put (2 s),
	// ustreamer stops putting frames.
	time.Sleep(2500 * time.Millisecond)
	id := func() uint64 {
		t.Helper()
		h := make([]byte, native.data)
		if _, err := r.f.ReadAt(h, 0); err != nil {
			t.Fatal(err)
		}
		return native.parse(h).id
	}
	before := id()
	time.Sleep(2500 * time.Millisecond)
	if after := id(); after != before {
		t.Errorf("ustreamer went on putting frames (%x, then %x) with no reader for 2.5 s: it reads last_client_ts as later than now", before, after)
	}
	// Looking again brings frames again.
	if _, err := r.Next(ctx, buf); err != nil {
		t.Fatal(err) // the one there, taken now
	}
	if f, err := r.Next(ctx, buf); err != nil || f.ID == before {
		t.Fatalf("no new frame after reading again: %+v %v", f.ID, err)
	}
}
