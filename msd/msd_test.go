package msd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"kvmd/msd"
	"kvmd/msd/msdtest"
)

// newManager returns a manager of a new storage directory holding files,
// with a stand-in LUN.
func newManager(t *testing.T, files map[string]string) (*msd.Manager, *msdtest.Drive, string) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d := &msdtest.Drive{}
	m, err := msd.New(msd.Config{Dir: dir, Drive: d, PollEvery: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return m, d, dir
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// cdImage is an image big enough for the kernel's CD-ROM (300 frames).
var cdImage = strings.Repeat("\x00", msd.MinCDROMSize)

// flashImage is an image of one block, the kernel's smallest.
var flashImage = strings.Repeat("f", msd.MinFlashSize)

func bptr(b bool) *bool     { return &b }
func sptr(s string) *string { return &s }
func names(s msd.State) []string {
	var out []string
	for n := range s.Storage.Images {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// TestStateShape: kvmd's shape, storage an object whenever drive is (the
// Home Assistant integration reads storage.images beside drive), both null
// when offline.
func TestStateShape(t *testing.T) {
	m, d, dir := newManager(t, map[string]string{"a.iso": cdImage, "b.img": "0123456789"})
	mt := time.Date(2026, 1, 2, 3, 4, 5, 500_000_000, time.UTC)
	if err := os.Chtimes(filepath.Join(dir, "b.img"), mt, mt); err != nil {
		t.Fatal(err)
	}
	// No image: not in the list.
	for _, f := range []string{".hidden", ".kvmd-upload-x"} {
		os.WriteFile(filepath.Join(dir, f), nil, 0o600)
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o700)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link.iso"))
	os.WriteFile(filepath.Join(dir, "bad\x01name"), nil, 0o600)
	if err := m.SetParams(msd.Params{Image: sptr("b.img")}); err != nil {
		t.Fatal(err)
	}
	st := m.State()
	got := jsonOf(t, st)
	for _, want := range []string{
		`{"enabled":true,"online":true,"busy":false,"storage":{"images":{`,
		`"b.img":{"complete":true,"removable":true,"writable":true,"size":10,"mod_ts":1767323045.5}`,
		`"a.iso":{"complete":true,"removable":true,"writable":false,"size":614400,"mod_ts":`,
		`"parts":{"":{"size":`,
		`"downloading":null,"uploading":null},"drive":{"image":{"name":"b.img","in_storage":true,"complete":true,"removable":true,"writable":true,"size":10,"mod_ts":1767323045.5},"connected":false,"cdrom":false,"rw":true}}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("state lacks %s:\n%s", want, got)
		}
	}
	if n := names(st); !slices.Equal(n, []string{"a.iso", "b.img"}) {
		t.Errorf("images %q", n)
	}
	p := st.Storage.Parts[""]
	if p.Size <= 0 || p.Free <= 0 || p.Free > p.Size || !p.Writable {
		t.Errorf("part %+v", p)
	}

	d.SetPresent(false)
	msd.Subsystem{M: m}.Watch(canceled(), nil) // one refresh
	if got := jsonOf(t, m.State()); got != `{"enabled":true,"online":false,"busy":false,"storage":null,"drive":null}` {
		t.Errorf("LUN gone: %s", got)
	}
	if err := m.SetConnected(true); !errors.Is(err, msd.ErrOffline) {
		t.Errorf("connect offline: %v", err)
	}
	if got := jsonOf(t, msd.Disabled()); got != `{"enabled":false,"online":false,"busy":false,"storage":null,"drive":null}` {
		t.Errorf("disabled: %s", got)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestConnectOrder: ro and cdrom go to the LUN before file (the kernel
// refuses them with EBUSY while a file is open); eject is forced_eject,
// which the host's lock does not hold back.
func TestConnectOrder(t *testing.T) {
	m, d, dir := newManager(t, map[string]string{"a.iso": cdImage, "f.img": flashImage})
	if err := m.SetConnected(true); !errors.Is(err, msd.ErrNotSelected) {
		t.Fatalf("connect with nothing chosen: %v", err)
	}
	if err := m.SetParams(msd.Params{Image: sptr("a.iso"), CDROM: bptr(true)}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetConnected(true); err != nil {
		t.Fatal(err)
	}
	want := []string{"ro=1", "cdrom=1", "file=" + filepath.Join(realDir(t, dir), "a.iso")}
	if got := d.Writes(); !slices.Equal(got, want) {
		t.Errorf("writes %q, want %q", got, want)
	}
	st := m.State()
	if !st.Drive.Connected || !st.Drive.CDROM || st.Drive.RW || st.Drive.Image == nil || st.Drive.Image.Name != "a.iso" {
		t.Errorf("connected drive: %s", jsonOf(t, st.Drive))
	}
	// Connected: set_params, connect and removing its image are refused.
	if err := m.SetParams(msd.Params{CDROM: bptr(false)}); !errors.Is(err, msd.ErrConnected) {
		t.Errorf("set_params connected: %v", err)
	}
	if err := m.SetConnected(true); !errors.Is(err, msd.ErrConnected) {
		t.Errorf("connect twice: %v", err)
	}
	if err := m.Remove("a.iso"); !errors.Is(err, msd.ErrConnected) {
		t.Errorf("remove the connected image: %v", err)
	}
	// Another image may go.
	if err := m.Remove("f.img"); err != nil {
		t.Errorf("remove another image while connected: %v", err)
	}
	// The host locks the medium; eject still works.
	d.HostLock(true)
	if err := m.SetConnected(false); err != nil {
		t.Fatalf("eject a locked medium: %v", err)
	}
	if got := d.Writes(); got[len(got)-1] != "forced_eject=1" {
		t.Errorf("eject wrote %q", got)
	}
	if st := m.State(); st.Drive.Connected || st.Drive.Image == nil || st.Drive.Image.Name != "a.iso" || !st.Drive.CDROM {
		t.Errorf("after eject (the choice stays): %s", jsonOf(t, st.Drive))
	}
	if err := m.SetConnected(false); !errors.Is(err, msd.ErrDisconnected) {
		t.Errorf("eject twice: %v", err)
	}
}

func realDir(t *testing.T, dir string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestParamsRules: rw is dropped for a CD-ROM and for an .iso (kvmd's
// rules); a flash image connects read-write; an unknown image is refused;
// a CD-ROM image shorter than the kernel's 300 frames is refused before
// the LUN is touched.
func TestParamsRules(t *testing.T) {
	m, d, _ := newManager(t, map[string]string{"a.iso": cdImage, "f.img": flashImage, "small.img": "tiny"})
	if err := m.SetParams(msd.Params{Image: sptr("nope.iso")}); !errors.Is(err, msd.ErrUnknownImage) {
		t.Errorf("unknown image: %v", err)
	}
	for _, tc := range []struct {
		image     string
		cdrom, rw bool
		wantRW    bool
	}{
		{"a.iso", false, true, false},
		{"f.img", true, true, false},
		{"f.img", false, true, true},
	} {
		if err := m.SetParams(msd.Params{Image: sptr(tc.image), CDROM: bptr(tc.cdrom), RW: bptr(tc.rw)}); err != nil {
			t.Fatal(err)
		}
		if got := m.State().Drive.RW; got != tc.wantRW {
			t.Errorf("%s cdrom=%v rw=%v: rw %v, want %v", tc.image, tc.cdrom, tc.rw, got, tc.wantRW)
		}
	}
	if err := m.SetConnected(true); err != nil {
		t.Fatal(err)
	}
	if st, _ := d.Get(); st.RO || st.CDROM {
		t.Errorf("flash rw connected: %+v", st)
	}
	if err := m.SetConnected(false); err != nil {
		t.Fatal(err)
	}
	n := len(d.Writes())
	if err := m.SetParams(msd.Params{Image: sptr("small.img"), CDROM: bptr(true)}); err != nil {
		t.Fatal(err)
	}
	if err := m.SetConnected(true); !errors.Is(err, msd.ErrOperation) || !strings.Contains(err.(*msd.Error).Msg, "too small") {
		t.Errorf("tiny CD-ROM: %v", err)
	}
	if len(d.Writes()) != n {
		t.Errorf("the LUN was written: %q", d.Writes()[n:])
	}
	// Clearing the choice.
	if err := m.SetParams(msd.Params{Image: sptr("")}); err != nil || m.State().Drive.Image != nil {
		t.Errorf("clear: %v %s", err, jsonOf(t, m.State().Drive))
	}
}

// TestHostSide: what the host or another program does to the LUN shows.
func TestHostSide(t *testing.T) {
	m, d, dir := newManager(t, map[string]string{"a.iso": cdImage})
	m.SetParams(msd.Params{Image: sptr("a.iso"), CDROM: bptr(true)})
	if err := m.SetConnected(true); err != nil {
		t.Fatal(err)
	}
	d.HostEject()
	msd.Subsystem{M: m}.Watch(canceled(), nil)
	if st := m.State(); st.Drive.Connected || st.Drive.Image == nil {
		t.Errorf("after the host ejected: %s", jsonOf(t, st.Drive))
	}
	// A file from outside the storage (kvmd-otg's start image).
	out := filepath.Join(t.TempDir(), "start.img")
	os.WriteFile(out, []byte(flashImage), 0o600)
	d.SetCDROM(false)
	if err := d.SetFile(out); err != nil {
		t.Fatal(err)
	}
	msd.Subsystem{M: m}.Watch(canceled(), nil)
	st := m.State()
	if !st.Drive.Connected || st.Drive.Image == nil || st.Drive.Image.InStorage || st.Drive.Image.Name != "start.img" || st.Drive.Image.Size != int64(len(flashImage)) || st.Drive.Image.Removable {
		t.Errorf("outside image: %s", jsonOf(t, st.Drive))
	}
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	st = m.State()
	if lun, _ := d.Get(); lun.File != "" || lun.CDROM || !lun.RO {
		t.Errorf("LUN after reset: %+v", lun)
	}
	if st.Drive.Connected || st.Drive.Image != nil || st.Drive.CDROM || st.Drive.RW {
		t.Errorf("drive after reset: %s", jsonOf(t, st.Drive))
	}
	// The chosen image removed by hand: unchosen.
	m.SetParams(msd.Params{Image: sptr("a.iso")})
	os.Remove(filepath.Join(dir, "a.iso"))
	msd.Subsystem{M: m}.Watch(canceled(), nil)
	if st := m.State(); st.Drive.Image != nil || len(st.Storage.Images) != 0 {
		t.Errorf("after removal by hand: %s", jsonOf(t, st))
	}
}

// blockingDrive holds SetFile until released, to catch an operation in
// the middle.
type blockingDrive struct {
	*msdtest.Drive
	entered, release chan struct{}
}

func (b *blockingDrive) SetFile(p string) error {
	b.entered <- struct{}{}
	<-b.release
	return b.Drive.SetFile(p)
}

// TestBusy: a drive operation while another runs is refused at once with
// kvmd's MsdIsBusyError, and busy shows; an upload may run beside it.
func TestBusy(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.img"), []byte(flashImage), 0o600)
	bd := &blockingDrive{Drive: &msdtest.Drive{}, entered: make(chan struct{}), release: make(chan struct{})}
	m, err := msd.New(msd.Config{Dir: dir, Drive: bd})
	if err != nil {
		t.Fatal(err)
	}
	m.SetParams(msd.Params{Image: sptr("a.img")})
	errc := make(chan error)
	go func() { errc <- m.SetConnected(true) }()
	<-bd.entered
	if !m.State().Busy {
		t.Error("not busy during an operation")
	}
	for what, op := range map[string]func() error{
		"set_params": func() error { return m.SetParams(msd.Params{RW: bptr(true)}) },
		"connect":    func() error { return m.SetConnected(false) },
		"remove":     func() error { return m.Remove("a.img") },
		"reset":      m.Reset,
	} {
		if err := op(); !errors.Is(err, msd.ErrBusy) || err.(*msd.Error).Status != 409 {
			t.Errorf("%s during another operation: %v", what, err)
		}
	}
	u, err := m.Begin("b.img", 3)
	if err != nil {
		t.Errorf("upload during an operation: %v", err)
	} else {
		u.Abort()
	}
	close(bd.release)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if m.State().Busy {
		t.Error("busy after the operation")
	}
}

// TestUpload: an image appears, whole, only when its upload is complete;
// a cut, aborted, oversized or over-long upload leaves no image and no
// file; a name that is taken is refused, never overwritten.
func TestUpload(t *testing.T) {
	m, _, dir := newManager(t, map[string]string{"old.iso": "old"})
	data := make([]byte, 20<<20+123) // several writeback windows
	rand.Read(data)

	u, err := m.Begin("new.img", int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	st := m.State()
	if st.Storage.Uploading == nil || st.Storage.Uploading.Name != "new.img" || st.Storage.Uploading.Size != int64(len(data)) || !st.Busy {
		t.Errorf("uploading: %s", jsonOf(t, st))
	}
	if _, ok := st.Storage.Images["new.img"]; ok {
		t.Error("the image is listed before it is complete")
	}
	if _, err := m.Begin("other.img", 1); !errors.Is(err, msd.ErrBusy) {
		t.Errorf("a second upload at once: %v", err)
	}
	var seen []int64
	if err := u.Copy(context.Background(), bytes.NewReader(data), func(n int64) { seen = append(seen, n) }); err != nil {
		t.Fatal(err)
	}
	if m.State().Storage.Uploading.Written != int64(len(data)) || seen[len(seen)-1] != int64(len(data)) {
		t.Errorf("progress: %d, %v", m.State().Storage.Uploading.Written, seen[len(seen)-1])
	}
	if _, ok := m.State().Storage.Images["new.img"]; ok {
		t.Error("listed before commit")
	}
	if err := u.Commit(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "new.img"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the image on disk differs (%v)", err)
	}
	st = m.State()
	if st.Storage.Uploading != nil || st.Busy || st.Storage.Images["new.img"].Size != int64(len(data)) {
		t.Errorf("after commit: %s", jsonOf(t, st.Storage.Uploading))
	}

	// Cut short: the connection ends early.
	u, _ = m.Begin("cut.img", 1000)
	err = u.Copy(context.Background(), io.MultiReader(strings.NewReader("partial"), errReader{io.ErrUnexpectedEOF}), nil)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut copy: %v", err)
	}
	u.Abort()
	// Short but no error from the reader: Commit refuses it.
	u, _ = m.Begin("short.img", 1000)
	if err := u.Copy(context.Background(), strings.NewReader("short"), nil); err != nil {
		t.Fatal(err)
	}
	if err := u.Commit(); !errors.Is(err, msd.ErrOperation) || !strings.Contains(err.Error(), "5 of 1000") {
		t.Errorf("short commit: %v", err)
	}
	// Longer than announced.
	u, _ = m.Begin("long.img", 3)
	if err := u.Copy(context.Background(), strings.NewReader("toolong"), nil); err == nil {
		t.Error("more bytes than announced accepted")
	}
	u.Abort()
	// Cancelled.
	u, _ = m.Begin("cancel.img", 3)
	if err := u.Copy(canceled(), strings.NewReader("abc"), nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled copy: %v", err)
	}
	u.Abort()
	if n := names(m.State()); !slices.Equal(n, []string{"new.img", "old.iso"}) {
		t.Errorf("images after the failed uploads: %q", n)
	}
	assertFiles(t, dir, "new.img", "old.iso")

	// Names: taken, invalid, too big.
	if _, err := m.Begin("old.iso", 1); !errors.Is(err, msd.ErrImageExists) {
		t.Errorf("taken name: %v", err)
	}
	os.WriteFile(filepath.Join(dir, ".hidden"), nil, 0o600)
	if _, err := m.Begin(".hidden", 1); !errors.Is(err, msd.ErrBadName) {
		t.Errorf("hidden name: %v", err)
	}
	os.Remove(filepath.Join(dir, ".hidden"))
	if _, err := m.Begin("huge.img", m.State().Storage.Parts[""].Free+1); !errors.Is(err, msd.ErrNoSpace) || err.(*msd.Error).Status != 413 {
		t.Errorf("bigger than the free space: %v", err)
	}
	// A file appearing under the name during the upload is not replaced.
	u, _ = m.Begin("race.img", 3)
	u.Copy(context.Background(), strings.NewReader("new"), nil)
	os.WriteFile(filepath.Join(dir, "race.img"), []byte("theirs"), 0o600)
	if err := u.Commit(); !errors.Is(err, msd.ErrImageExists) {
		t.Errorf("commit over a new file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "race.img")); string(b) != "theirs" {
		t.Errorf("the other file was overwritten: %q", b)
	}
	assertFiles(t, dir, "new.img", "old.iso", "race.img")
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// assertFiles checks that dir holds exactly names: no temporary file left.
func assertFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %q, want %q", dir, got, names)
	}
}

// TestRemoveIncompleteAtStart: what a killed daemon's upload left is
// removed when the next one starts, and was never listed.
func TestRemoveIncompleteAtStart(t *testing.T) {
	m, _, dir := newManager(t, map[string]string{"keep.img": "x"})
	u, err := m.Begin("killed.img", 10)
	if err != nil {
		t.Fatal(err)
	}
	u.Copy(context.Background(), strings.NewReader("half"), nil)
	// The daemon dies here: no Commit, no Abort.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Fatalf("expected the temporary file beside keep.img: %d entries", len(ents))
	}
	if n := names(m.State()); !slices.Equal(n, []string{"keep.img"}) {
		t.Errorf("listed mid-upload: %q", n)
	}
	m2, err := msd.New(msd.Config{Dir: dir, Drive: &msdtest.Drive{}})
	if err != nil {
		t.Fatal(err)
	}
	assertFiles(t, dir, "keep.img")
	if n := names(m2.State()); !slices.Equal(n, []string{"keep.img"}) {
		t.Errorf("after restart: %q", n)
	}
}

// TestKvmdIncomplete: an image kvmd left half-written (its marker beside
// it) is listed as incomplete; removing it removes the marker too.
func TestKvmdIncomplete(t *testing.T) {
	m, _, dir := newManager(t, map[string]string{"half.iso": "x", ".__half.iso.incomplete": "", "whole.iso": "y"})
	st := m.State()
	if st.Storage.Images["half.iso"].Complete || !st.Storage.Images["whole.iso"].Complete {
		t.Errorf("complete flags: %s", jsonOf(t, st.Storage.Images))
	}
	if err := m.Remove("half.iso"); err != nil {
		t.Fatal(err)
	}
	assertFiles(t, dir, "whole.iso")
}

// TestRead: reading an image gives its bytes and shows its progress.
func TestRead(t *testing.T) {
	m, _, _ := newManager(t, map[string]string{"a.img": "image data"})
	if _, err := m.Open("nope.img"); !errors.Is(err, msd.ErrUnknownImage) {
		t.Errorf("unknown: %v", err)
	}
	r, err := m.Open("a.img")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Open("a.img"); !errors.Is(err, msd.ErrBusy) {
		t.Errorf("second read: %v", err)
	}
	buf := make([]byte, 4)
	io.ReadFull(r, buf)
	if d := m.State().Storage.Downloading; d == nil || d.Readed != 4 || d.Size != 10 || d.Name != "a.img" {
		t.Errorf("downloading: %+v", d)
	}
	rest, _ := io.ReadAll(r)
	if string(buf)+string(rest) != "image data" {
		t.Errorf("read %q", string(buf)+string(rest))
	}
	r.Close()
	if m.State().Storage.Downloading != nil || m.State().Busy {
		t.Error("still downloading after close")
	}
}

// TestWatchPublishes: progress and changes go out as events, whether the
// subsystem's Watch started before the upload began or after it. Started
// after, its first state is the one with the bytes written so far, and
// nothing changes until the next write: it must publish that first state
// itself (before, it only compared it, and the "3 bytes written" event
// never came: a flake of make test under load). There the interval is an
// hour, so that only the first state and the upload's own pokes make
// events.
func TestWatchPublishes(t *testing.T) {
	for _, watchFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("watch first %v", watchFirst), func(t *testing.T) {
			m, _, _ := newManager(t, map[string]string{"a.img": "x"})
			if !watchFirst {
				var err error
				if m, err = msd.New(msd.Config{Dir: m.Dir(), Drive: &msdtest.Drive{}, PollEvery: time.Hour}); err != nil {
					t.Fatal(err)
				}
			}
			got := make(chan msd.State, 100)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			start := func() {
				go func() { msd.Subsystem{M: m}.Watch(ctx, func(s msd.State) { got <- s }); close(done) }()
			}
			defer func() { cancel(); <-done }()
			if watchFirst {
				start()
			}
			u, err := m.Begin("b.img", 6)
			if err != nil {
				t.Fatal(err)
			}
			u.Copy(context.Background(), strings.NewReader("abc"), nil)
			if !watchFirst {
				start()
			}
			wait := func(what string, ok func(msd.State) bool) {
				t.Helper()
				timeout := time.After(5 * time.Second)
				for {
					select {
					case s := <-got:
						if ok(s) {
							return
						}
					case <-timeout:
						t.Fatalf("no event with %s", what)
					}
				}
			}
			wait("3 bytes written", func(s msd.State) bool { return s.Storage.Uploading != nil && s.Storage.Uploading.Written == 3 })
			u.Copy(context.Background(), strings.NewReader("def"), nil)
			u.Commit()
			wait("the new image", func(s msd.State) bool { _, ok := s.Storage.Images["b.img"]; return ok && s.Storage.Uploading == nil })
		})
	}
}

// TestDriveErrors: the LUN's errno becomes kvmd's error.
func TestDriveErrors(t *testing.T) {
	for _, tc := range []struct {
		errno error
		want  *msd.Error
	}{
		{syscall.EBUSY, msd.ErrLocked},
		{syscall.EACCES, msd.ErrPermissions},
		{syscall.EIO, msd.ErrOperation},
	} {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "a.img"), []byte(flashImage), 0o600)
		m, _ := msd.New(msd.Config{Dir: dir, Drive: failingDrive{&msdtest.Drive{}, tc.errno}})
		m.SetParams(msd.Params{Image: sptr("a.img")})
		if err := m.SetConnected(true); !errors.Is(err, tc.want) || !errors.Is(err, tc.errno) {
			t.Errorf("%v: %v, want %s", tc.errno, err, tc.want.Name)
		}
	}
}

type failingDrive struct {
	*msdtest.Drive
	err error
}

func (f failingDrive) SetFile(string) error {
	return &os.PathError{Op: "write", Path: "file", Err: f.err}
}
