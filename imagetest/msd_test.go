package imagetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	msdDir = "/var/lib/kvmd/msd"
	lunDir = gadgetDir + "/functions/mass_storage.usb0/lun.0"
	// hostText is the file inside the test ISO that the host reads back.
	hostText = "kvmd virtual media: read by the host from its own CD-ROM drive\n"
)

// msdState is /api/msd as the test reads it.
type msdState struct {
	Enabled, Online, Busy bool
	Storage               *struct {
		Images map[string]struct {
			Size     int64 `json:"size"`
			Complete bool  `json:"complete"`
		} `json:"images"`
		Uploading *struct {
			Name    string `json:"name"`
			Size    int64  `json:"size"`
			Written int64  `json:"written"`
		} `json:"uploading"`
	} `json:"storage"`
	Drive *struct {
		Image *struct {
			Name string `json:"name"`
		} `json:"image"`
		Connected, CDROM, RW bool
	} `json:"drive"`
}

func (s *system) msdState(t *testing.T) msdState {
	t.Helper()
	var st msdState
	s.getJSON(t, "/api/msd", &st)
	if st.Online && (st.Storage == nil || st.Drive == nil) {
		t.Fatalf("/api/msd online with storage %v, drive %v: both must be objects", st.Storage, st.Drive)
	}
	return st
}

// msdPost POSTs an /api/msd operation as admin and fails t unless it is
// answered 200.
func (s *system) msdPost(t *testing.T, path string) {
	t.Helper()
	st, body, err := s.c.do("POST", path, s.creds(t), nil)
	if err != nil || st != 200 {
		t.Fatalf("POST %s: %d %v\n%s", path, st, err, body)
	}
}

// upload sends body to /api/msd/write with Content-Length size, with no
// time limit but ctx's, and returns the status and answer.
func (s *system) upload(t *testing.T, ctx context.Context, name string, size int64, body io.Reader) (int, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", s.c.base+"/api/msd/write?image="+name, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = size
	for k, v := range s.creds(t) {
		req.Header.Set(k, v)
	}
	hc := *s.c.hc
	hc.Timeout = 0
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// hostDrive finds the gadget's LUN on the host side (the guest's SCSI
// disks and CD-ROMs over USB whose vendor is PiKVM): its name and type
// (disk, rom), "" when there is none.
func (s *system) hostDrive(t *testing.T) (name, typ string) {
	t.Helper()
	var lsblk struct {
		Blockdevices []struct {
			Name, Type, Tran, Vendor string
		} `json:"blockdevices"`
	}
	out := s.m.shell.must(t, "lsblk -J -a -d -o NAME,TYPE,TRAN,VENDOR")
	if err := json.Unmarshal([]byte(out), &lsblk); err != nil {
		t.Fatalf("lsblk: %v\n%s", err, out)
	}
	for _, b := range lsblk.Blockdevices {
		if b.Tran == "usb" && strings.TrimSpace(b.Vendor) == "PiKVM" {
			return b.Name, b.Type
		}
	}
	return "", ""
}

// redetect makes the host side probe the drive again, as a host does when
// the drive is plugged in or the host boots: the SCSI layer reads the
// device type (disk or CD-ROM) only then, so a change of cdrom shows
// after it (PiKVM's kvmd has the same limit: a mode change needs the
// drive reconnected or the host rebooted). It returns the new device
// once it has the type want.
func (s *system) redetect(t *testing.T, want string) string {
	t.Helper()
	sh := s.m.shell
	dev, _ := s.hostDrive(t)
	if dev == "" {
		t.Fatal("the host side has no PiKVM drive to probe again")
	}
	sh.must(t, fmt.Sprintf(`d=/sys/block/%s/device; h=$(basename $(readlink -f $d)); h=${h%%%%:*}; `+
		`echo 1 > $d/delete; echo '- - -' > /sys/class/scsi_host/host$h/scan; udevadm settle`, dev))
	var name, typ string
	if !waitFor(context.Background(), 30*time.Second, 500*time.Millisecond, func() bool {
		name, typ = s.hostDrive(t)
		return typ == want
	}) {
		out, _ := sh.run(t, "lsblk -a; dmesg | tail -20")
		t.Fatalf("after probing again the host sees %q (%s), want a %s\n%s", name, typ, want, out)
	}
	return name
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// makeISO builds an ISO 9660 image with xorriso, as a user would make one:
// hostText in hello.txt and random filler to pass the kernel's 600 KiB
// minimum for a CD-ROM.
func makeISO(t *testing.T) []byte {
	t.Helper()
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		t.Fatalf("xorriso is needed (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.Mkdir(src, 0o755)
	os.WriteFile(filepath.Join(src, "hello.txt"), []byte(hostText), 0o644)
	filler := make([]byte, 700<<10)
	rand.Read(filler)
	os.WriteFile(filepath.Join(src, "filler.bin"), filler, 0o644)
	iso := filepath.Join(dir, "test.iso")
	if out, err := exec.Command(xorriso, "-as", "mkisofs", "-quiet", "-V", "KVMD_TEST", "-R", "-J", "-o", iso, src).CombinedOutput(); err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	b, err := os.ReadFile(iso)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testMSD: virtual media end to end, the host being the guest's own
// dummy_hcd side. An ISO made here with xorriso, uploaded through the
// API, is read back bit for bit from the host's CD-ROM drive, and a file
// in it after mounting; ejecting it while mounted (the host locks the
// tray) leaves the host with no medium; a flash image connected
// read-write takes the host's writes into the image; an upload cut by
// the client, and one cut by kill -9 of the daemon, leave no image and
// no file.
func (s *system) testMSD(t *testing.T, fig *figures) {
	sh := s.m.shell
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if st := s.msdState(t); !st.Enabled || !st.Online {
		out, _ := sh.run(t, "journalctl -b -o cat -u kvmd.service | grep -i msd | tail; ls -la "+msdDir+" "+lunDir)
		t.Fatalf("/api/msd: enabled %v online %v\n%s", st.Enabled, st.Online, out)
	}
	if out := sh.must(t, "stat -c '%U:%G %a' "+msdDir); out != "root:kvmd 770" {
		t.Errorf("%s: %s, want root:kvmd 770", msdDir, out)
	}

	// The ISO, uploaded through the daemon.
	iso := makeISO(t)
	began := time.Now()
	if st, body, err := s.upload(t, ctx, "kvmd-test.iso", int64(len(iso)), bytes.NewReader(iso)); err != nil || st != 200 ||
		!strings.Contains(string(body), fmt.Sprintf(`"written":%d`, len(iso))) {
		t.Fatalf("upload: %d %v\n%s", st, err, body)
	}
	fig.msdUploadMiBps = float64(len(iso)) / (1 << 20) / time.Since(began).Seconds()
	if st := s.msdState(t); st.Storage.Images["kvmd-test.iso"].Size != int64(len(iso)) || st.Storage.Uploading != nil {
		t.Fatalf("after the upload: %+v", st.Storage)
	}
	if got := sh.must(t, "sha256sum < "+msdDir+"/kvmd-test.iso | cut -d' ' -f1"); got != sha256Hex(iso) {
		t.Fatalf("the image on the device differs from the one sent")
	}

	// Connected as a CD-ROM: the LUN gets the flags, then the file.
	s.msdPost(t, "/api/msd/set_params?image=kvmd-test.iso&cdrom=1&rw=0")
	s.msdPost(t, "/api/msd/set_connected?connected=1")
	if out := sh.must(t, "cd "+lunDir+" && cat file cdrom ro"); out != msdDir+"/kvmd-test.iso\n1\n1" {
		t.Errorf("the LUN after connecting (file, cdrom, ro):\n%s", out)
	}
	if st := s.msdState(t); !st.Drive.Connected || !st.Drive.CDROM || st.Drive.Image == nil || st.Drive.Image.Name != "kvmd-test.iso" {
		t.Errorf("/api/msd drive: %+v", st.Drive)
	}
	cd := s.redetect(t, "rom")
	if got := sh.must(t, fmt.Sprintf("blockdev --getsize64 /dev/%s; head -c %d /dev/%s | sha256sum | cut -d' ' -f1", cd, len(iso), cd)); got != fmt.Sprintf("%d\n%s", len(iso), sha256Hex(iso)) {
		t.Fatalf("the host's /dev/%s (size, sha256):\n%s\nwant %d, %s", cd, got, len(iso), sha256Hex(iso))
	}
	if got := sh.must(t, "mkdir -p /mnt/kvmd-cd && mount -t iso9660 -o ro /dev/"+cd+" /mnt/kvmd-cd && cat /mnt/kvmd-cd/hello.txt"); got+"\n" != hostText {
		t.Errorf("hello.txt on the host's mounted CD: %q", got)
	}
	t.Logf("host side: /dev/%s reads the ISO bit for bit (sha256 %s…), hello.txt mounted", cd, sha256Hex(iso)[:12])

	// Ejected while the host has it mounted (the tray locked): forced.
	s.msdPost(t, "/api/msd/set_connected?connected=0")
	if out := sh.must(t, "cat "+lunDir+"/file"); out != "" {
		t.Errorf("the LUN's file after eject: %q", out)
	}
	out, st := sh.run(t, "dd if=/dev/"+cd+" of=/dev/null bs=2048 count=1")
	if st == 0 || !strings.Contains(out, "No medium found") {
		t.Errorf("the host reading /dev/%s after eject: status %d:\n%s", cd, st, out)
	}
	sh.run(t, "umount -l /mnt/kvmd-cd")

	// A flash image connected read-write: the host's writes land in it.
	flash := make([]byte, 8<<20)
	rand.Read(flash)
	if st, body, err := s.upload(t, ctx, "flash.img", int64(len(flash)), bytes.NewReader(flash)); err != nil || st != 200 {
		t.Fatalf("upload flash.img: %d %v\n%s", st, err, body)
	}
	s.msdPost(t, "/api/msd/set_params?image=flash.img&cdrom=0&rw=1")
	s.msdPost(t, "/api/msd/set_connected?connected=1")
	if out := sh.must(t, "cd "+lunDir+" && cat cdrom ro"); out != "0\n0" {
		t.Errorf("the LUN connected read-write (cdrom, ro): %q", out)
	}
	disk := s.redetect(t, "disk")
	if got := sh.must(t, "sha256sum < /dev/"+disk+" | cut -d' ' -f1"); got != sha256Hex(flash) {
		t.Errorf("the host's /dev/%s differs from flash.img", disk)
	}
	ddOut := sh.must(t, "dd if=/dev/"+disk+" of=/dev/null bs=1M iflag=direct 2>&1")
	fig.msdHostReadMBps = ddRate(ddOut)
	t.Logf("host read of /dev/%s: %s", disk, strings.TrimSpace(ddOut))
	const hostWrite = "written by the host through its USB drive"
	const at = 1 << 20
	sh.must(t, fmt.Sprintf("printf '%s' | dd of=/dev/%s bs=1 seek=%d conv=notrunc,fsync status=none", hostWrite, disk, at))
	s.msdPost(t, "/api/msd/set_connected?connected=0")
	if _, st := sh.run(t, "dd if=/dev/"+disk+" of=/dev/null bs=512 count=1 2>&1 | grep -q 'No medium found'"); st != 0 {
		t.Errorf("the host still reads /dev/%s after eject", disk)
	}
	want := append(append(append([]byte(nil), flash[:at]...), hostWrite...), flash[at+len(hostWrite):]...)
	// The host's write, in the image file on the device's storage, read
	// there by sha256sum: the proof that does not go through the daemon.
	if got := sh.must(t, "sha256sum < "+msdDir+"/flash.img | cut -d' ' -f1"); got != sha256Hex(want) {
		t.Errorf("%s/flash.img on the device after the host's write: sha256 %s, want %s (the flash image with the host's write at %d)",
			msdDir, got, sha256Hex(want), at)
	}
	// And the same bytes read back through the API.
	stc, got, err := s.c.do("GET", "/api/msd/read?image=flash.img", s.creds(t), nil)
	if err != nil || stc != 200 || !bytes.Equal(got, want) {
		t.Errorf("flash.img read back through the API (%d, %v): %d bytes, host's write there: %v", stc, err, len(got),
			len(got) > at+len(hostWrite) && string(got[at:at+len(hostWrite)]) == hostWrite)
	}

	// A cut connection, then a killed daemon, mid-upload.
	images := "flash.img\nkvmd-test.iso"
	if out := sh.must(t, "ls -1A "+msdDir); out != images {
		t.Fatalf("%s before the cut uploads:\n%s", msdDir, out)
	}
	s.cutUpload(t, ctx, "cut.img", func() {})
	if out := sh.must(t, "ls -1A "+msdDir); out != images {
		t.Errorf("%s after a cut upload:\n%s", msdDir, out)
	}
	pid := s.mainPID(t)
	s.cutUpload(t, ctx, "killed.img", func() {
		if out := sh.must(t, "ls -1A "+msdDir); !regexp.MustCompile(`(?m)^\.kvmd-upload-`).MatchString(out) {
			t.Errorf("no temporary file while uploading:\n%s", out)
		}
		sh.must(t, fmt.Sprintf("kill -9 %d", pid))
	})
	if !waitFor(ctx, 2*time.Minute, time.Second, func() bool {
		p := s.props(t, "kvmd.service", "MainPID", "ActiveState", "SubState")
		n, _ := strconv.Atoi(p["MainPID"])
		return n != 0 && n != pid && p["SubState"] == "running" && s.c.answers()
	}) {
		t.Fatal("kvmd was not restarted after kill -9")
	}
	if st := s.msdState(t); st.Storage.Uploading != nil || len(st.Storage.Images) != 2 {
		t.Errorf("after the restart: %+v", st.Storage)
	}
	if out := sh.must(t, "ls -1A "+msdDir); out != images {
		t.Errorf("%s after kill -9 mid-upload and a restart:\n%s", msdDir, out)
	}
	if log := sh.must(t, "journalctl -b -o cat _SYSTEMD_UNIT=kvmd.service _PID=$(systemctl show -p MainPID --value kvmd.service)"); !strings.Contains(log, "removed an incomplete upload") {
		t.Errorf("the restarted daemon did not say it removed the killed upload:\n%s", tail(log, 2000))
	}
	for _, n := range []string{"kvmd-test.iso", "flash.img"} {
		s.msdPost(t, "/api/msd/remove?image="+n)
	}
	t.Logf("virtual media checks: %v (ISO %d KiB, upload %.1f MiB/s through TLS, host read %.1f MB/s, all under TCG)",
		time.Since(start).Round(100*time.Millisecond), len(iso)>>10, fig.msdUploadMiBps, fig.msdHostReadMBps)
}

// powerCutImage is the image uploaded right before the power cut of
// testReboot, and its sha256.
type powerCutImage struct {
	name, sum string
	size      int64
}

// uploadBeforePowerCut uploads an image of 4 MiB for testReboot's power
// cut to come right after the answer.
func (s *system) uploadBeforePowerCut(t *testing.T) powerCutImage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data := make([]byte, 4<<20)
	rand.Read(data)
	img := powerCutImage{name: "powercut.img", sum: sha256Hex(data), size: int64(len(data))}
	if st, body, err := s.upload(t, ctx, img.name, img.size, bytes.NewReader(data)); err != nil || st != 200 {
		t.Fatalf("upload: %d %v\n%s", st, err, body)
	}
	return img
}

// checkAfterPowerCut: an image whose upload was answered is on disk after
// a power cut: whole under its name, with no temporary file beside it,
// and listed in /api/msd. It removes it.
func (s *system) checkAfterPowerCut(t *testing.T, img powerCutImage) {
	t.Helper()
	sh := s.m.shell
	if got := sh.must(t, "sha256sum < "+msdDir+"/"+img.name+" | cut -d' ' -f1"); got != img.sum {
		t.Errorf("%s after the power cut differs from what was uploaded", img.name)
	}
	if out := sh.must(t, "ls -1A "+msdDir); !slices.Contains(strings.Split(out, "\n"), img.name) || strings.Contains(out, ".kvmd-upload-") {
		t.Errorf("%s after the power cut:\n%s", msdDir, out)
	}
	if st := s.msdState(t); st.Storage == nil || st.Storage.Images[img.name].Size != img.size {
		t.Errorf("/api/msd after the power cut: %+v", st.Storage)
	}
	s.msdPost(t, "/api/msd/remove?image="+img.name)
}

// cutUpload starts an upload of 8 MiB, sends 1 MiB, waits until the
// daemon shows it in /api/msd, calls mid, then cuts the connection; the
// image must never be listed, and the upload must be gone from the state.
func (s *system) cutUpload(t *testing.T, ctx context.Context, name string, mid func()) {
	t.Helper()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		st, body, err := s.upload(t, ctx, name, 8<<20, pr)
		if err == nil {
			err = fmt.Errorf("answered %d: %s", st, body)
		}
		done <- err
	}()
	go pw.Write(make([]byte, 1<<20))
	if !waitFor(ctx, time.Minute, 200*time.Millisecond, func() bool {
		u := s.msdState(t).Storage.Uploading
		return u != nil && u.Name == name && u.Written > 0
	}) {
		t.Fatalf("%s: no upload in /api/msd", name)
	}
	mid()
	pw.CloseWithError(fmt.Errorf("the test cuts the upload"))
	if err := <-done; err == nil {
		t.Errorf("%s: the cut upload succeeded", name)
	}
	// The daemon may be restarting: errors are retried.
	if !waitFor(ctx, time.Minute, 500*time.Millisecond, func() bool {
		stc, body, err := s.c.do("GET", "/api/msd", s.creds(t), nil)
		var env struct{ Result msdState }
		if err != nil || stc != 200 || json.Unmarshal(body, &env) != nil {
			return false
		}
		return env.Result.Storage != nil && env.Result.Storage.Uploading == nil
	}) {
		t.Fatalf("%s: the upload stays in /api/msd after the cut", name)
	}
	if _, ok := s.msdState(t).Storage.Images[name]; ok {
		t.Errorf("%s: the cut upload is listed", name)
	}
}

// ddRate reads dd's "N bytes ... copied, T s, R MB/s" line, in MB/s.
func ddRate(out string) float64 {
	m := regexp.MustCompile(`copied, [0-9.,]+ s, ([0-9.,]+) ([kMG]?B)/s`).FindStringSubmatch(out)
	if m == nil {
		return 0
	}
	v, _ := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", "."), 64)
	switch m[2] {
	case "kB":
		v /= 1000
	case "GB":
		v *= 1000
	}
	return v
}
