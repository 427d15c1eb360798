package main

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/boombuler/barcode/qr"
	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"kvmd/internal/testutil"
)

func totpRun(args ...string) (stdout string, err error) {
	var o, e bytes.Buffer
	err = totpCmd(args, strings.NewReader(""), &o, &e)
	return o.String(), err
}

var (
	secretRE = regexp.MustCompile(`(?m)^Secret: ([A-Z2-7]+)$`)
	uriRE    = regexp.MustCompile(`(?m)^URI: +(otpauth://\S+)$`)
)

// shown returns the secret and URI that show printed.
func shown(t *testing.T, out string) (secret, uri string) {
	t.Helper()
	s, u := secretRE.FindStringSubmatch(out), uriRE.FindStringSubmatch(out)
	if s == nil || u == nil {
		t.Fatalf("no secret and URI in %q", out)
	}
	return s[1], u[1]
}

func readSecretFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// checkKey checks that the URI describes secret the way every
// authenticator app expects, and that codes made from it validate.
func checkKey(t *testing.T, secret, uri string) {
	t.Helper()
	key, err := otp.NewKeyFromURL(uri)
	if err != nil {
		t.Fatalf("NewKeyFromURL(%q): %v", uri, err)
	}
	host, _ := os.Hostname()
	if key.Type() != "totp" || key.Secret() != secret || key.Issuer() != "kvmd" || key.AccountName() != host ||
		key.Period() != 30 || key.Digits() != otp.DigitsSix || key.Algorithm() != otp.AlgorithmSHA1 {
		t.Errorf("key from %q = type %s, secret %s, issuer %s, account %s, period %d, digits %v, %v; "+
			"want totp, %s, kvmd, %s, 30, 6, SHA1",
			uri, key.Type(), key.Secret(), key.Issuer(), key.AccountName(), key.Period(), key.Digits(),
			key.Algorithm(), secret, host)
	}
	now := time.Now()
	code, err := totp.GenerateCode(secret, now)
	if err != nil {
		t.Fatal(err)
	}
	if !totp.Validate(code, key.Secret()) {
		t.Error("a code made from the written secret does not validate against the URI's")
	}
	// A code from another step must not: the check above can fail.
	old, _ := totp.GenerateCode(secret, now.Add(-5*time.Minute))
	if old != code && totp.Validate(old, key.Secret()) {
		t.Error("a five-minute-old code validates")
	}
}

func TestTOTPLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "totp.secret")

	// init on a missing file.
	out, err := totpRun("init", "--secret", path)
	if err != nil {
		t.Fatalf("init: %v", err)
	}
	secret, uri := shown(t, out)
	if got := readSecretFile(t, path); got != secret+"\n" {
		t.Errorf("file = %q, want %q", got, secret+"\n")
	}
	if len(secret) != 32 {
		t.Errorf("secret %q has %d characters, want 32 (160 bits)", secret, len(secret))
	}
	checkMode(t, path, 0o600)
	checkKey(t, secret, uri)

	// init again refuses, and leaves the file alone.
	if _, err := totpRun("init", "--secret", path); err == nil || !strings.Contains(err.Error(), "-f") {
		t.Errorf("second init = %v, want a refusal that mentions -f", err)
	}
	if got := readSecretFile(t, path); got != secret+"\n" {
		t.Errorf("refused init changed the file to %q", got)
	}

	// show prints the same.
	out, err = totpRun("show", "--secret", path)
	if err != nil {
		t.Fatalf("show: %v", err)
	}
	if s2, u2 := shown(t, out); s2 != secret || u2 != uri {
		t.Errorf("show = %s %s, want %s %s", s2, u2, secret, uri)
	}

	// -f replaces, before or after the other flags.
	for _, args := range [][]string{{"init", "-f", "--secret", path}, {"init", "--secret", path, "-f"}} {
		out, err = totpRun(args...)
		if err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		s3, u3 := shown(t, out)
		if s3 == secret {
			t.Errorf("%q kept the old secret", args)
		}
		if got := readSecretFile(t, path); got != s3+"\n" {
			t.Errorf("file = %q, want %q", got, s3+"\n")
		}
		checkKey(t, s3, u3)
		secret = s3
	}

	// del leaves an empty file, not none.
	if out, err := totpRun("del", "--secret", path); err != nil || out != "" {
		t.Fatalf("del = %q, %v", out, err)
	}
	if got := readSecretFile(t, path); got != "" {
		t.Errorf("file after del = %q, want empty", got)
	}
	checkMode(t, path, 0o600)
	if _, err := totpRun("show", "--secret", path); !errors.Is(err, errTOTPDisabled) {
		t.Errorf("show after del = %v, want %v", err, errTOTPDisabled)
	}

	// An empty file is not a secret to protect: init needs no -f.
	if _, err := totpRun("init", "--secret", path); err != nil {
		t.Errorf("init on an empty file: %v", err)
	}
}

func TestTOTPMissingFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "none")
	_, err := totpRun("show", "--secret", path)
	if !errors.Is(err, errTOTPDisabled) || !strings.HasPrefix(err.Error(), "2FA is not enabled") {
		t.Errorf("show of a missing file = %v, want %q", err, errTOTPDisabled)
	}
	if err := os.WriteFile(path, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := totpRun("show", "--secret", path); !errors.Is(err, errTOTPDisabled) {
		t.Errorf("show of a blank file = %v, want %v", err, errTOTPDisabled)
	}
	// del of a missing file creates it empty: a configured file that is
	// missing makes the daemon refuse every login.
	other := filepath.Join(dir, "other")
	if _, err := totpRun("del", "--secret", other); err != nil {
		t.Fatal(err)
	}
	if got := readSecretFile(t, other); got != "" {
		t.Errorf("file = %q, want empty", got)
	}
}

func TestTOTPShowForeignSecret(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	// Lower case with padding, as some tools write it.
	if err := os.WriteFile(path, []byte("jbswy3dpehpk3pxp====\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := totpRun("show", "--secret", path)
	if err != nil {
		t.Fatal(err)
	}
	secret, uri := shown(t, out)
	if secret != "JBSWY3DPEHPK3PXP" {
		t.Errorf("shown secret = %q, want JBSWY3DPEHPK3PXP", secret)
	}
	checkKey(t, secret, uri)
	if err := os.WriteFile(path, []byte("not base32!\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := totpRun("show", "--secret", path); err == nil || !strings.Contains(err.Error(), "base32") {
		t.Errorf("show of garbage = %v, want a base32 error", err)
	}
}

func TestTOTPErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	tests := []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"enable"}, `unknown subcommand "enable"`},
		{[]string{"show"}, "--secret FILE is required"},
		{[]string{"show", "--secret", path, "extra"}, `unexpected argument "extra"`},
		{[]string{"show", "-f", "--secret", path}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, err := totpRun(tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %v, want one containing %q", err, tt.want)
			}
		})
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("a failed command created the file")
	}
}

// TestTOTPBinary runs init, the refusal and show through the real binary.
func TestTOTPBinary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	out, stderr, err := runKvmd(t, "", "totp", "init", "--secret", path)
	if err != nil {
		t.Fatalf("init: %v\n%s", err, stderr)
	}
	secret, uri := shown(t, out)
	checkKey(t, secret, uri)
	_, stderr, err = runKvmd(t, "", "totp", "init", "--secret", path)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr, "already holds a 2FA secret") {
		t.Errorf("second init: %v, stderr %q; want exit status 1 and a refusal", err, stderr)
	}
	if _, stderr, err := runKvmd(t, "", "totp", "del", "--secret", path); err != nil {
		t.Fatalf("del: %v\n%s", err, stderr)
	}
	_, stderr, err = runKvmd(t, "", "totp", "show", "--secret", path)
	if err == nil || !strings.Contains(stderr, "2FA is not enabled") {
		t.Errorf("show after del: %v, stderr %q", err, stderr)
	}
}

// readQR turns writeQR's output back into modules, [y][x], true for dark.
func readQR(t *testing.T, text string) [][]bool {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	var m [][]bool
	for i, line := range lines {
		if !strings.HasPrefix(line, qrStart) || !strings.HasSuffix(line, qrReset) {
			t.Fatalf("line %d = %q, want it wrapped in the colour codes", i, line)
		}
		cells := []rune(strings.TrimSuffix(strings.TrimPrefix(line, qrStart), qrReset))
		top, bottom := make([]bool, len(cells)), make([]bool, len(cells))
		for x, c := range cells {
			switch c {
			case '█':
				top[x], bottom[x] = true, true
			case '▀':
				top[x] = true
			case '▄':
				bottom[x] = true
			case ' ':
			default:
				t.Fatalf("line %d holds %q", i, c)
			}
		}
		m = append(m, top, bottom)
	}
	return m
}

func TestWriteQR(t *testing.T) {
	const uri = "otpauth://totp/kvmd:pikvm?algorithm=SHA1&digits=6&issuer=kvmd&period=30&secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"
	var b bytes.Buffer
	if err := writeQR(&b, uri); err != nil {
		t.Fatal(err)
	}
	got := readQR(t, b.String())

	code, err := qr.Encode(uri, qr.M, qr.Auto)
	if err != nil {
		t.Fatal(err)
	}
	size := code.Bounds().Dx()
	n := size + 2*qrQuietZone
	// The last text row is half padding when n is odd.
	if len(got) != n+n%2 || len(got[0]) != n {
		t.Fatalf("read %dx%d modules, want %dx%d", len(got[0]), len(got), n, n)
	}
	for y := range got {
		for x := range got[y] {
			want := false
			cx, cy := x-qrQuietZone, y-qrQuietZone
			if cx >= 0 && cy >= 0 && cx < size && cy < size {
				r, _, _, _ := code.At(cx, cy).RGBA()
				want = r == 0
			}
			if got[y][x] != want {
				t.Fatalf("module (%d,%d) dark=%v, want %v", x, y, got[y][x], want)
			}
		}
	}

	// A picture of what a terminal would show, scanned by zbarimg (Debian's
	// zbar-tools, from make deps).
	zbar := testutil.NeedTool(t, "zbar-tools", "zbarimg")
	const px = 6
	img := image.NewGray(image.Rect(0, 0, n*px, n*px))
	for y := range n {
		for x := range n {
			c := color.Gray{Y: 0xff}
			if got[y][x] {
				c = color.Gray{}
			}
			for dy := range px {
				for dx := range px {
					img.SetGray(x*px+dx, y*px+dy, c)
				}
			}
		}
	}
	file := filepath.Join(t.TempDir(), "qr.png")
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pngData.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(zbar, "--quiet", "--raw", file).Output()
	if err != nil {
		t.Fatalf("zbarimg: %v", err)
	}
	if scanned := strings.TrimSpace(string(out)); scanned != uri {
		t.Errorf("scanned %q, want %q", scanned, uri)
	}
}
