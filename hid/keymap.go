package hid

import (
	"archive/zip"
	"bufio"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// DefaultKeymap is the keymap print uses when none is named (kvmd's).
const DefaultKeymap = "en-us"

// Stroke is how one character is typed: a key, with Shift and AltGr
// (the right Alt, ISO_Level3_Shift in the layouts here) held or not.
type Stroke struct {
	Key          Key
	Shift, AltGr bool
}

// Keymap maps the characters a keyboard layout types to the strokes that
// type them.
type Keymap struct {
	Name    string
	strokes map[rune]Stroke
}

// Stroke returns how r is typed.
func (km *Keymap) Stroke(r rune) (Stroke, bool) {
	s, ok := km.strokes[r]
	return s, ok
}

// Len is the number of characters the keymap types.
func (km *Keymap) Len() int { return len(km.strokes) }

// ParseKeymap reads a keymap file: one character a line, "U+XXXX KeyName"
// and then "shift", "altgr" or both as needed; "#" starts a comment. The
// first line for a character wins.
func ParseKeymap(name string, r io.Reader) (*Keymap, error) {
	km := &Keymap{Name: name, strokes: map[rune]Stroke{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 2 || !strings.HasPrefix(f[0], "U+") {
			return nil, fmt.Errorf("keymap %s:%d: want U+XXXX KeyName [shift] [altgr]", name, n)
		}
		cp, err := strconv.ParseUint(f[0][2:], 16, 32)
		if err != nil || cp > unicode.MaxRune {
			return nil, fmt.Errorf("keymap %s:%d: bad code point %q", name, n, f[0])
		}
		k, ok := KeyByName(f[1])
		if !ok {
			return nil, fmt.Errorf("keymap %s:%d: unknown key %q", name, n, f[1])
		}
		s := Stroke{Key: k}
		for _, m := range f[2:] {
			switch m {
			case "shift":
				s.Shift = true
			case "altgr":
				s.AltGr = true
			default:
				return nil, fmt.Errorf("keymap %s:%d: unknown modifier %q", name, n, m)
			}
		}
		if _, dup := km.strokes[rune(cp)]; !dup {
			km.strokes[rune(cp)] = s
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("keymap %s: %w", name, err)
	}
	return km, nil
}

// Keys returned for the characters print types itself, whatever the
// keymap (kvmd/keyboard/printer.py).
var (
	keyEnter = keyByName["Enter"]
	keyTab   = keyByName["Tab"]
	keySpace = keyByName["Space"]
	keyShift = keyByName["ShiftLeft"]
	keyAltGr = keyByName["AltRight"]
)

// Type returns the key presses that type text, as kvmd's printer does:
// newline, tab and space are their keys; typographic quotes and dashes
// become ASCII ones; a character the keymap lacks is looked up in
// fallback (kvmd adds its US table to every keymap), else skipped, as are
// characters that do not print. Shift and AltGr stay held across
// characters that need them and are released at the end.
func (km *Keymap) Type(text string, fallback *Keymap) []KeyPress {
	var out []KeyPress
	var shift, altgr bool
	stroke := func(r rune) (Stroke, bool) {
		switch r {
		case '\n':
			return Stroke{Key: keyEnter}, true
		case '\t':
			return Stroke{Key: keyTab}, true
		case ' ':
			return Stroke{Key: keySpace}, true
		}
		if !unicode.IsPrint(r) {
			return Stroke{}, false
		}
		if s, ok := km.strokes[r]; ok {
			return s, true
		}
		if fallback != nil {
			s, ok := fallback.strokes[r]
			return s, ok
		}
		return Stroke{}, false
	}
	for _, r := range text {
		var rs []rune
		switch r {
		case '‚', '‘', '’':
			rs = []rune{'\''}
		case '„', '“', '”':
			rs = []rune{'"'}
		case '–':
			rs = []rune{'-'}
		case '—':
			rs = []rune{'-', '-'}
		default:
			rs = []rune{r}
		}
		for _, r := range rs {
			s, ok := stroke(r)
			if !ok {
				continue
			}
			if s.Shift != shift {
				out = append(out, KeyPress{keyShift, s.Shift})
				shift = s.Shift
			}
			if s.AltGr != altgr {
				out = append(out, KeyPress{keyAltGr, s.AltGr})
				altgr = s.AltGr
			}
			out = append(out, KeyPress{s.Key, true}, KeyPress{s.Key, false})
		}
	}
	if shift {
		out = append(out, KeyPress{keyShift, false})
	}
	if altgr {
		out = append(out, KeyPress{keyAltGr, false})
	}
	return out
}

// ErrNoKeymap is returned for a keymap name that is not known.
var ErrNoKeymap = errors.New("hid: no such keymap")

// Keymaps is a set of keymaps by name, each parsed when first used.
type Keymaps struct {
	// Default is the keymap of a print that names none.
	Default string
	fsys    fs.FS
	names   []string

	mu    sync.Mutex
	cache map[string]*Keymap
}

// keymapName is what a keymap's file is named; the licence and notes
// beside them are in capitals.
var keymapName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// NewKeymaps returns the keymaps in fsys's top directory, a file each,
// named by the file in lower case.
func NewKeymaps(fsys fs.FS, def string) (*Keymaps, error) {
	ents, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, err
	}
	k := &Keymaps{Default: def, fsys: fsys, cache: map[string]*Keymap{}}
	for _, e := range ents {
		if e.Type().IsRegular() && keymapName.MatchString(e.Name()) {
			k.names = append(k.names, e.Name())
		}
	}
	slices.Sort(k.names)
	if !slices.Contains(k.names, def) {
		return nil, fmt.Errorf("%w: the default %q is not among %s", ErrNoKeymap, def, strings.Join(k.names, ", "))
	}
	return k, nil
}

// builtinZip holds the files of the directory keymaps, deflated (about a
// quarter of their size in the binary): tools/cmd/genkeymaps writes both,
// and a test holds the archive to the files.
//
//go:embed keymaps.zip
var builtinZip string

// BuiltinKeymaps returns the keymaps built into the daemon (generated
// from xkeyboard-config by tools/cmd/genkeymaps, see docs/hid.md), en-us
// the default.
func BuiltinKeymaps() *Keymaps {
	zr, err := zip.NewReader(strings.NewReader(builtinZip), int64(len(builtinZip)))
	if err != nil {
		panic(err) // the embedded archive is checked by the tests
	}
	k, err := NewKeymaps(zr, DefaultKeymap)
	if err != nil {
		panic(err)
	}
	return k
}

// Names returns the keymaps' names, sorted.
func (k *Keymaps) Names() []string { return slices.Clone(k.names) }

// Get returns a keymap by name; "" is the default.
func (k *Keymaps) Get(name string) (*Keymap, error) {
	if name == "" {
		name = k.Default
	}
	if !slices.Contains(k.names, name) {
		return nil, fmt.Errorf("%w: %q", ErrNoKeymap, name)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if km := k.cache[name]; km != nil {
		return km, nil
	}
	b, err := fs.ReadFile(k.fsys, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoKeymap, err)
	}
	km, err := ParseKeymap(name, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	k.cache[name] = km
	return km, nil
}

// fallback is the keymap that fills another's gaps: the default, en-us
// (nil if it cannot be read).
func (k *Keymaps) fallback() *Keymap {
	km, err := k.Get(DefaultKeymap)
	if err != nil {
		km, _ = k.Get("")
	}
	return km
}
