// Package xkbtest types key events as a Linux desktop with a given
// keyboard layout does, for tests: libxkbcommon itself compiles the layout
// from xkeyboard-config and turns key presses into text, dead keys and
// their compose sequences included, through a small Python helper
// (xkbtype.py, over libxkbcommon with ctypes). It is the judge of what a
// host types from the presses the daemon sends, so that nothing of it is
// this project's own reading of the layouts.
package xkbtest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"kvmd/internal/testutil"
)

// Locale is the locale whose compose table the host uses (libX11's
// en_US.UTF-8/Compose, which most UTF-8 locales use or include).
const Locale = "en_US.UTF-8"

// composeFile is the compose table of Locale (Debian libx11-data).
const composeFile = "/usr/share/X11/locale/en_US.UTF-8/Compose"

// noLibrary is the helper's exit status when libxkbcommon cannot be loaded.
const noLibrary = 3

//go:embed xkbtype.py
var script []byte

// Press is a key event as a Linux host's input layer reports it: the
// key's code (linux/input-event-codes.h) and whether it went down.
type Press struct {
	Code uint16
	Down bool
}

// MarshalJSON writes a press as the helper reads it: [code, 1 or 0].
func (p Press) MarshalJSON() ([]byte, error) {
	down := 0
	if p.Down {
		down = 1
	}
	return json.Marshal([2]int{int(p.Code), down})
}

// Layout is one xkeyboard-config layout (and variant, "" for the basic
// one) and the cases to type with it, each from a fresh keyboard.
type Layout struct {
	Layout, Variant string
	// OwnSymbols compiles the layout's own symbols alone, without the
	// "pc" symbols xkeyboard-config's rules add to every layout (the
	// evdev rules compile layout L as symbols "pc+L+inet(evdev)"): a key
	// types something there when the layout's own keyboard has it.
	OwnSymbols bool
	Cases      [][]Press
}

// Typed is what a case typed: the text, and whether a compose sequence
// (a dead key) was still under way at its end or was cancelled in it.
type Typed struct {
	Text      string `json:"text"`
	Pending   bool   `json:"pending"`
	Cancelled bool   `json:"cancelled"`
}

// Type types every layout's cases with libxkbcommon, in one run of the
// helper, and returns what each typed, by layout and case. Without
// python3, libxkbcommon or the compose table it ends t through
// testutil.Missing.
func Type(t testing.TB, layouts []Layout) [][]Typed {
	t.Helper()
	python := testutil.NeedTool(t, "python3", "python3")
	if _, err := os.Stat(composeFile); err != nil {
		testutil.Missing(t, "libX11's compose table (apt-get install libx11-data, or make deps): "+err.Error())
	}
	type layout struct {
		Layout     string    `json:"layout"`
		Variant    string    `json:"variant"`
		OwnSymbols bool      `json:"own_symbols"`
		Cases      [][]Press `json:"cases"`
	}
	req := struct {
		Locale  string   `json:"locale"`
		Layouts []layout `json:"layouts"`
	}{Locale: Locale}
	for _, l := range layouts {
		if l.Cases == nil {
			l.Cases = [][]Press{} // [], not null
		}
		req.Layouts = append(req.Layouts, layout(l))
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	helper := filepath.Join(dir, "xkbtype.py")
	if err := os.WriteFile(helper, script, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(python, helper)
	// Only the system's layouts and compose table: no user's ~/.XCompose,
	// ~/.config/xkb or XKB_DEFAULT_* settings.
	cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == noLibrary {
			testutil.Missing(t, "libxkbcommon (apt-get install libxkbcommon0, or make deps): "+stderr.String())
		}
		t.Fatalf("xkbtype.py: %v\n%s", err, stderr.Bytes())
	}
	var res struct {
		Layouts [][]Typed `json:"layouts"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("xkbtype.py's answer: %v\n%.500s", err, out)
	}
	if len(res.Layouts) != len(layouts) {
		t.Fatalf("xkbtype.py answered for %d layouts of %d", len(res.Layouts), len(layouts))
	}
	for i, l := range res.Layouts {
		if len(l) != len(layouts[i].Cases) {
			t.Fatalf("xkbtype.py answered %d cases of %d for %s", len(l), len(layouts[i].Cases), layouts[i].Layout)
		}
	}
	return res.Layouts
}
