// Command genkeymaps writes the keymaps that POST /api/hid/print types
// with (hid/keymaps/), from xkeyboard-config's layouts: each layout is
// compiled by libxkbcommon's xkbcli (Debian packages xkb-data and
// libxkbcommon-tools), once as a host compiles it and once with only its
// own symbols (which keys its keyboard has), and each character its keys
// type with Shift and AltGr becomes a line "U+XXXX KeyName [shift]
// [altgr]"; a character the host's compose table makes of a dead key and
// another key (libX11's en_US.UTF-8/Compose, Debian libx11-data) becomes
// the strokes in order, "U+005E Equal shift, Space". Keysym names are
// turned into characters with X11's keysymdef.h (Debian x11proto-dev).
//
//	cd tools && go run ./cmd/genkeymaps -out ../hid/keymaps
//
// Its output is committed; hid's tests type every character of every
// keymap with libxkbcommon and the same layout and compose table, and this
// command's test regenerates the files where the tools are installed and
// compares.
package main

import (
	"archive/zip"
	"bytes"
	"compress/flate"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"kvmd/hid"
)

// Layout is one keymap: kvmd's name for it (its contrib/keymaps file
// names, which clients send as keymap=) and the xkeyboard-config layout
// and variant it is made from.
type Layout struct {
	Name, XKB, Variant string
}

// Layouts are the keymaps made: the names kvmd ships, each from the
// xkeyboard-config layout of the same language and country.
var Layouts = []Layout{
	{"ar", "ara", ""},
	{"bepo", "fr", "bepo"},
	{"cz", "cz", ""},
	{"da", "dk", ""},
	{"de", "de", ""},
	{"de-ch", "ch", ""},
	{"en-gb", "gb", ""},
	{"en-us", "us", ""},
	{"en-us-altgr-intl", "us", "altgr-intl"},
	{"en-us-colemak", "us", "colemak"},
	{"es", "es", ""},
	{"et", "ee", ""},
	{"fi", "fi", ""},
	{"fo", "fo", ""},
	{"fr", "fr", ""},
	{"fr-be", "be", ""},
	{"fr-ca", "ca", ""},
	{"fr-ch", "ch", "fr"},
	{"hr", "hr", ""},
	{"hu", "hu", ""},
	{"is", "is", ""},
	{"it", "it", ""},
	{"ja", "jp", ""},
	{"lt", "lt", ""},
	{"lv", "lv", ""},
	{"mk", "mk", ""},
	{"nl", "nl", ""},
	{"no", "no", ""},
	{"pl", "pl", ""},
	{"pt", "pt", ""},
	{"pt-br", "br", ""},
	{"ru", "ru", ""},
	{"sl", "si", ""},
	{"sv", "se", ""},
	{"th", "th", ""},
	{"tr", "tr", ""},
}

func main() {
	out := flag.String("out", "../hid/keymaps", "directory to write the keymaps to")
	zipPath := flag.String("zip", "../hid/keymaps.zip", "the archive of the directory's files that the daemon embeds")
	keysymdef := flag.String("keysymdef", "/usr/include/X11/keysymdef.h", "X11's keysymdef.h")
	compose := flag.String("compose", composeFile, "libX11's compose table of the host's locale")
	xkbcli := flag.String("xkbcli", "xkbcli", "libxkbcommon's xkbcli")
	flag.Parse()
	err := run(*out, inputs{keysymdef: *keysymdef, compose: *compose, xkbcli: *xkbcli})
	if err == nil {
		err = writeZip(*zipPath, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genkeymaps:", err)
		os.Exit(1)
	}
}

// composeLocale and composeFile are the locale whose compose table the
// keymaps are made for, and its file: en_US.UTF-8's, which most UTF-8
// locales use (libX11's compose.dir) or include.
const (
	composeLocale = "en_US.UTF-8"
	composeFile   = "/usr/share/X11/locale/en_US.UTF-8/Compose"
)

// inputs are the files and tools the keymaps are made with.
type inputs struct {
	keysymdef, compose, xkbcli string
}

func run(out string, in inputs) error {
	f, err := os.Open(in.keysymdef)
	if err != nil {
		return err
	}
	syms, err := ParseKeysymdef(f)
	f.Close()
	if err != nil {
		return err
	}
	f, err = os.Open(in.compose)
	if err != nil {
		return err
	}
	compose, err := ParseCompose(f, syms)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", in.compose, err)
	}
	src := Sources{XKBData: debVersion("xkb-data"), X11Data: debVersion("libx11-data"), Locale: composeLocale}
	for _, l := range Layouts {
		args := []string{"compile-keymap", "--layout", l.XKB}
		if l.Variant != "" {
			args = append(args, "--variant", l.Variant)
		}
		full, err := exec.Command(in.xkbcli, args...).Output()
		if err != nil {
			return fmt.Errorf("%s %s: %w", in.xkbcli, strings.Join(args, " "), err)
		}
		own, err := compileXKB(in.xkbcli, ownKeyText(l))
		if err != nil {
			return fmt.Errorf("%s: %w", l.Name, err)
		}
		var b bytes.Buffer
		if err := Generate(&b, l, src, full, own, syms, compose); err != nil {
			return fmt.Errorf("%s: %w", l.Name, err)
		}
		if err := os.WriteFile(filepath.Join(out, l.Name), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// compileXKB compiles a keymap written in XKB's text format with
// xkbcli compile-keymap --from-xkb. Its exit status is not read: in
// libxkbcommon 1.5 (Debian 12) that mode exits with 1 when it succeeds
// and 0 when it fails (tools/compile-keymap.c returns its bool), so the
// keymap it writes is what tells.
func compileXKB(xkbcli, text string) ([]byte, error) {
	cmd := exec.Command(xkbcli, "compile-keymap", "--from-xkb")
	cmd.Stdin = strings.NewReader(text)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if !bytes.HasPrefix(out, []byte("xkb_keymap")) {
		return nil, fmt.Errorf("%s compile-keymap --from-xkb: %v: %s", xkbcli, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// writeZip writes the regular files of dir, sorted by name, into a zip
// archive at path, deflated at the best compression and without times, so
// that the same files make the same archive. The daemon embeds the archive
// (package hid), not the directory, and without the comments of the
// characters' lines (hid.CompactKeymap): a ninth of the size.
func writeZip(path, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	zw.RegisterCompressor(zip.Deflate, func(w io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(w, flate.BestCompression)
	})
	for _, e := range ents { // ReadDir sorts them
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		w, err := zw.CreateHeader(&zip.FileHeader{Name: e.Name(), Method: zip.Deflate})
		if err != nil {
			return err
		}
		if _, err := w.Write(hid.CompactKeymap(data)); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// debVersion is Debian's version of a package, for the files' headers.
func debVersion(pkg string) string {
	b, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
