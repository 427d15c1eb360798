package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// composeNode is a node of a compose table's tree: the sequences that go
// on from here by keysym, or, at a sequence's end, what it types.
type composeNode struct {
	next map[uint32]*composeNode
	leaf bool
	text string
}

// ParseCompose reads a compose table (libX11's Compose(5) format, the
// locale's file in /usr/share/X11/locale): each line a sequence of
// "<keysym>" and what it types, `: "string" [keysym]` or `: keysym`.
// Sequences go into the tree as libxkbcommon 1.5's compose parser puts
// them (src/compose/parser.c, add_production): a later sequence that
// goes on from an earlier one replaces it, one that is the beginning of
// an earlier one is left out, and a later one of the same keys replaces
// the earlier. Lines with modifiers ("!" or a modifier's name before
// the keys) and includes are refused: the locales' tables the keymaps are
// made for have none.
func ParseCompose(r io.Reader, syms *Keysyms) (*composeNode, error) {
	root := &composeNode{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		lhs, rhs, ok := strings.Cut(line, ":")
		if !ok || !strings.HasPrefix(lhs, "<") {
			return nil, fmt.Errorf("compose line %d: not a sequence of keys: %q", n, line)
		}
		var seq []uint32
		known := true
		for _, f := range strings.Fields(lhs) {
			name, open := strings.CutPrefix(f, "<")
			name, closed := strings.CutSuffix(name, ">")
			if !open || !closed {
				return nil, fmt.Errorf("compose line %d: %q is not a <keysym>", n, f)
			}
			v, ok := syms.Value(name)
			known = known && ok
			seq = append(seq, v)
		}
		text, sym, err := composeResult(rhs)
		if err != nil {
			return nil, fmt.Errorf("compose line %d: %w", n, err)
		}
		if !known {
			continue // a keysym keysymdef.h does not name: no layout types it
		}
		if text == "" && sym != "" {
			if v, ok := syms.Value(sym); ok {
				if c, ok := syms.Char(v); ok {
					text = string(c)
				}
			}
		}
		root.add(seq, text)
	}
	return root, sc.Err()
}

// add puts a sequence into the tree (see ParseCompose for the rules).
func (nd *composeNode) add(seq []uint32, text string) {
	for i, k := range seq {
		if nd.next == nil {
			nd.next = map[uint32]*composeNode{}
		}
		child := nd.next[k]
		if child == nil {
			child = &composeNode{}
			nd.next[k] = child
		}
		if i < len(seq)-1 {
			child.leaf, child.text = false, ""
			nd = child
			continue
		}
		if len(child.next) > 0 {
			return
		}
		child.leaf, child.text = true, text
	}
}

// composeResult reads the part of a compose line after the colon: an
// optional quoted string (with \\, \", octal and \x escapes, in
// UTF-8) and an optional keysym name, then perhaps a comment.
func composeResult(rhs string) (text, sym string, err error) {
	s := strings.TrimSpace(rhs)
	if strings.HasPrefix(s, `"`) {
		var b strings.Builder
		i := 1
		for ; i < len(s) && s[i] != '"'; i++ {
			if s[i] != '\\' || i+1 >= len(s) {
				b.WriteByte(s[i])
				continue
			}
			i++
			switch c := s[i]; {
			case c == 'x' || c == 'X':
				j := i + 1
				for j < len(s) && j < i+3 && strings.IndexByte("0123456789abcdefABCDEF", s[j]) >= 0 {
					j++
				}
				v, err := strconv.ParseUint(s[i+1:j], 16, 8)
				if err != nil {
					return "", "", fmt.Errorf("bad escape in %q", rhs)
				}
				b.WriteByte(byte(v))
				i = j - 1
			case c >= '0' && c <= '7':
				j := i
				for j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7' {
					j++
				}
				v, _ := strconv.ParseUint(s[i:j], 8, 8)
				b.WriteByte(byte(v))
				i = j - 1
			default:
				b.WriteByte(c)
			}
		}
		if i >= len(s) {
			return "", "", fmt.Errorf("unterminated string in %q", rhs)
		}
		if !utf8.ValidString(b.String()) {
			// libxkbcommon refuses the table then.
			return "", "", fmt.Errorf("a string not in UTF-8 in %q", rhs)
		}
		text, s = b.String(), strings.TrimSpace(s[i+1:])
	}
	if f := strings.Fields(s); len(f) > 0 && f[0][0] != '#' {
		sym = f[0]
	}
	if text == "" && sym == "" {
		return "", "", fmt.Errorf("nothing typed in %q", rhs)
	}
	return text, sym, nil
}
