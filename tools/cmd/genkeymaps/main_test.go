package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/hid"
	"kvmd/internal/testutil"
)

// TestCommittedKeymaps regenerates every keymap from this machine's
// xkeyboard-config and compares it with the committed file: the files are
// what the generator makes of the data they name in their headers. Where
// the xkb-data version differs from the one the files were made from, the
// header says so and the comparison is skipped (make deps installs the
// Debian 12 packages the files come from).
func TestCommittedKeymaps(t *testing.T) {
	for _, tool := range []string{"xkbcli", "dpkg-query"} {
		if _, err := exec.LookPath(tool); err != nil {
			testutil.Missing(t, tool+" (make deps installs libxkbcommon-tools): "+err.Error())
		}
	}
	const keysymdef = "/usr/include/X11/keysymdef.h"
	if _, err := os.Stat(keysymdef); err != nil {
		testutil.Missing(t, "keysymdef.h (make deps installs x11proto-dev): "+err.Error())
	}
	out := t.TempDir()
	if _, err := os.Stat(composeFile); err != nil {
		testutil.Missing(t, "libX11's compose table (make deps installs libx11-data): "+err.Error())
	}
	if err := run(out, inputs{keysymdef: keysymdef, compose: composeFile, xkbcli: "xkbcli"}); err != nil {
		t.Fatal(err)
	}
	committed := filepath.Join("..", "..", "..", "hid", "keymaps")
	for _, l := range Layouts {
		want, err := os.ReadFile(filepath.Join(committed, l.Name))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, l.Name))
		if err != nil {
			t.Fatal(err)
		}
		if header(got) != header(want) {
			t.Skipf("%s: this machine's xkb-data differs from the committed files' (%q, %q)", l.Name, header(got), header(want))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the committed file is not what genkeymaps makes of xkb-data; regenerate (cd tools && go run ./cmd/genkeymaps)", l.Name)
		}
		if _, err := hid.ParseKeymap(l.Name, bytes.NewReader(got)); err != nil {
			t.Errorf("%s: %v", l.Name, err)
		}
	}
}

// header is a keymap file's line naming the xkb-data and libx11-data it
// came from.
func header(b []byte) string {
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "xkb-data") {
			return l
		}
	}
	return ""
}
