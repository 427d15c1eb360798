package hid

import (
	"archive/zip"
	"bufio"
	"bytes"
	"context"
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

// Stroke is one key of a character's typing, with Shift and AltGr (the
// right Alt, ISO_Level3_Shift in the layouts here) held or not.
type Stroke struct {
	Key          Key
	Shift, AltGr bool
}

// Keymap maps the characters a keyboard layout types to the strokes that
// type them: one key, or a dead key (or two) and then a key, as the
// host's compose table makes the character of them.
type Keymap struct {
	Name string
	// Layout and Variant are the xkeyboard-config layout the keymap was
	// made from, as a Linux host names it (Variant "" for the basic one).
	Layout, Variant string
	strokes         map[rune][]Stroke
}

// Keys typed for the characters every layout types the same way, and the
// modifiers print holds (kvmd/keyboard/printer.py).
var (
	keyEnter = keyByName["Enter"]
	keyShift = keyByName["ShiftLeft"]
	keyAltGr = keyByName["AltRight"]

	strokesNewline = []Stroke{{Key: keyEnter}}
	strokesTab     = []Stroke{{Key: keyByName["Tab"]}}
	strokesSpace   = []Stroke{{Key: keyByName["Space"]}}
)

// Strokes returns how r is typed, in order (callers must not change
// them), or nil when the keymap's layout cannot type r. Newline, tab and
// space are Enter, Tab and Space on every layout.
func (km *Keymap) Strokes(r rune) []Stroke {
	switch r {
	case '\n':
		return strokesNewline
	case '\t':
		return strokesTab
	case ' ':
		return strokesSpace
	}
	return km.strokes[r]
}

// Len is the number of characters the keymap types.
func (km *Keymap) Len() int { return len(km.strokes) }

// Chars returns the characters the keymap types, in order.
func (km *Keymap) Chars() []rune {
	rs := make([]rune, 0, len(km.strokes))
	for r := range km.strokes {
		rs = append(rs, r)
	}
	slices.Sort(rs)
	return rs
}

// ParseKeymap reads a keymap file: one character a line, "U+XXXX" and
// its strokes separated by commas, each a key name and then "shift",
// "altgr" or both as needed ("U+00EA Backquote, KeyE": a dead key, then
// a key); a line "xkb LAYOUT [VARIANT]" names the xkeyboard-config
// layout; "#" starts a comment. The first line for a character wins.
func ParseKeymap(name string, r io.Reader) (*Keymap, error) {
	km := &Keymap{Name: name, strokes: map[rune][]Stroke{}}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if f[0] == "xkb" && len(f) <= 3 && len(f) >= 2 {
			km.Layout, km.Variant = f[1], strings.Join(f[2:], "")
			continue
		}
		if len(f) < 2 || !strings.HasPrefix(f[0], "U+") {
			return nil, fmt.Errorf("keymap %s:%d: want U+XXXX KeyName [shift] [altgr][, KeyName...]", name, n)
		}
		cp, err := strconv.ParseUint(f[0][2:], 16, 32)
		if err != nil || cp > unicode.MaxRune {
			return nil, fmt.Errorf("keymap %s:%d: bad code point %q", name, n, f[0])
		}
		_, rest, _ := strings.Cut(line, f[0])
		var seq []Stroke
		for _, part := range strings.Split(rest, ",") {
			s, err := parseStroke(strings.Fields(part))
			if err != nil {
				return nil, fmt.Errorf("keymap %s:%d: %w", name, n, err)
			}
			seq = append(seq, s)
		}
		if _, dup := km.strokes[rune(cp)]; !dup {
			km.strokes[rune(cp)] = seq
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("keymap %s: %w", name, err)
	}
	return km, nil
}

// parseStroke reads one stroke: a key name and its modifiers.
func parseStroke(f []string) (Stroke, error) {
	if len(f) == 0 {
		return Stroke{}, errors.New("an empty stroke")
	}
	k, ok := KeyByName(f[0])
	if !ok {
		return Stroke{}, fmt.Errorf("unknown key %q", f[0])
	}
	s := Stroke{Key: k}
	for _, m := range f[1:] {
		switch m {
		case "shift":
			s.Shift = true
		case "altgr":
			s.AltGr = true
		default:
			return Stroke{}, fmt.Errorf("unknown modifier %q", m)
		}
	}
	return s, nil
}

// Skipped is what a text has that its keymap's layout cannot type: how
// many characters, and which (each once, in the order met, at most
// MaxSkippedChars of them).
type Skipped struct {
	Count int
	Chars []rune
}

// MaxSkippedChars bounds Skipped.Chars.
const MaxSkippedChars = 64

func (s *Skipped) add(r rune) {
	s.Count++
	if len(s.Chars) < MaxSkippedChars && !slices.Contains(s.Chars, r) {
		s.Chars = append(s.Chars, r)
	}
}

// Typer turns text into key presses a character at a time: it holds Shift
// and AltGr across characters that need them, types a line break as Enter
// whether it is "\n", "\r\n" or "\r", and skips, counting them, the
// characters its keymap's layout cannot type, never typing another
// character in their place.
type Typer struct {
	km               *Keymap
	shift, altgr, cr bool
	Skipped          Skipped
}

// Typer returns a Typer with nothing held.
func (km *Keymap) Typer() *Typer { return &Typer{km: km} }

// Rune appends to out the presses that type r.
func (t *Typer) Rune(out []KeyPress, r rune) []KeyPress {
	cr := t.cr
	t.cr = r == '\r'
	switch {
	case r == '\n' && cr:
		return out // the end of a "\r\n"
	case r == '\r':
		r = '\n'
	}
	seq := t.km.Strokes(r)
	if seq == nil {
		t.Skipped.add(r)
		return out
	}
	for _, s := range seq {
		if s.Shift != t.shift {
			out = append(out, KeyPress{keyShift, s.Shift})
			t.shift = s.Shift
		}
		if s.AltGr != t.altgr {
			out = append(out, KeyPress{keyAltGr, s.AltGr})
			t.altgr = s.AltGr
		}
		out = append(out, KeyPress{s.Key, true}, KeyPress{s.Key, false})
	}
	return out
}

// End appends to out the releases of the modifiers still held.
func (t *Typer) End(out []KeyPress) []KeyPress {
	if t.shift {
		out = append(out, KeyPress{keyShift, false})
		t.shift = false
	}
	if t.altgr {
		out = append(out, KeyPress{keyAltGr, false})
		t.altgr = false
	}
	return out
}

// Type returns the key presses that type text (see Typer) and what it
// skipped.
func (km *Keymap) Type(text string) ([]KeyPress, Skipped) {
	t := km.Typer()
	var out []KeyPress
	for _, r := range text {
		out = t.Rune(out, r)
	}
	return t.End(out), t.Skipped
}

// Skipped returns what Type would skip of text, without typing it.
func (km *Keymap) Skipped(text string) Skipped {
	var s Skipped
	for _, r := range text {
		if r != '\r' && km.Strokes(r) == nil {
			s.add(r)
		}
	}
	return s
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

// builtinZip holds the files of the directory keymaps, without the
// comments of their characters' lines (see CompactKeymap) and deflated
// (about a ninth of their size in the binary): tools/cmd/genkeymaps
// writes both, and a test holds the archive to the files.
//
//go:embed keymaps.zip
var builtinZip string

// CompactKeymap returns a keymap file's text as the daemon embeds it: its
// characters' lines ("U+...") without their comments (the character
// itself, for whoever reads the file) and the spaces before them; the
// other lines (the header, a licence) as they are.
func CompactKeymap(b []byte) []byte {
	var out bytes.Buffer
	for line := range bytes.Lines(b) {
		if i := bytes.IndexByte(line, '#'); i >= 0 && bytes.HasPrefix(line, []byte("U+")) {
			out.Write(bytes.TrimRight(line[:i], " \t"))
			out.WriteByte('\n')
			continue
		}
		out.Write(line)
	}
	return out.Bytes()
}

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

// KeymapsState is kvmd's /api/hid/keymaps result and hid_keymaps event.
type KeymapsState struct {
	Keymaps struct {
		Default   string   `json:"default"`
		Available []string `json:"available"`
	} `json:"keymaps"`
}

// State is the keymaps as kvmd shows them: the default and every name.
func (k *Keymaps) State() KeymapsState {
	var st KeymapsState
	st.Keymaps.Default, st.Keymaps.Available = k.Default, k.Names()
	return st
}

// KeymapsSubsystem is kvmd's "hid_keymaps" subsystem (package subsystem's
// shape): the keymaps print types with, which do not change while the
// daemon runs.
type KeymapsSubsystem struct {
	K *Keymaps
}

// Name is kvmd's.
func (s KeymapsSubsystem) Name() string { return "hid_keymaps" }

// State is the keymaps.
func (s KeymapsSubsystem) State(context.Context) KeymapsState { return s.K.State() }

// Watch publishes nothing: the keymaps are read at start.
func (s KeymapsSubsystem) Watch(ctx context.Context, _ func(KeymapsState)) { <-ctx.Done() }
