package brcheck

import (
	"bufio"
	"os"
	"regexp"
	"strings"
)

// A Symbol is a Kconfig option: its type and where it is defined.
type Symbol struct {
	Type   string // bool, tristate, string, int, hex; "" if never given one
	File   string
	Line   int
	Legacy bool // defined only in Config.in.legacy: set, it stops the build
	// Depends are the symbols in the entry's "depends on" lines.
	Depends []string
}

var (
	reEntry  = regexp.MustCompile(`^\s*(menuconfig|config)\s+([A-Za-z0-9_]+)\s*$`)
	reType   = regexp.MustCompile(`^\s*(bool|tristate|string|int|hex|def_bool|def_tristate)\b`)
	reSource = regexp.MustCompile(`^\s*(?:o|r|or)?source\s+"([^"]+)"`)
	reHelp   = regexp.MustCompile(`^\s*(help|---help---)\s*$`)
	reDeps   = regexp.MustCompile(`^\s*depends\s+on\s+(.*)$`)
	reWord   = regexp.MustCompile(`[A-Za-z0-9_]+`)
	// Keywords that end the attributes of a config entry.
	reEnd = regexp.MustCompile(`^\s*(config|menuconfig|choice|endchoice|menu|endmenu|comment|if|endif|source|mainmenu)\b`)
	reInt = regexp.MustCompile(`^-?[0-9]+$`)
	reHex = regexp.MustCompile(`^(0[xX])?[0-9a-fA-F]+$`)
)

// scanKconfig adds the symbols defined in one Kconfig file to syms and
// returns the files it sources, as written, with their line numbers.
// Help texts are skipped, so "config" at the start of a help line is
// not taken for an entry.
func scanKconfig(path, name string, syms map[string]*Symbol) (sources []sourced, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	legacy := strings.HasSuffix(path, "Config.in.legacy")
	var cur *Symbol
	helpIndent := -1 // >= 0 while in a help text: its first line's indentation
	inHelp := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if inHelp {
			if strings.TrimSpace(line) == "" {
				continue
			}
			ind := indent(line)
			if helpIndent < 0 {
				helpIndent = ind
			}
			if ind >= helpIndent {
				continue
			}
			inHelp = false
		}
		if m := reEntry.FindStringSubmatch(line); m != nil {
			sym := syms[m[2]]
			if sym == nil {
				sym = &Symbol{File: name, Line: n, Legacy: legacy}
				syms[m[2]] = sym
			} else if !legacy {
				sym.Legacy = false
			}
			cur = sym
			continue
		}
		if reEnd.MatchString(line) {
			cur = nil
		}
		if m := reSource.FindStringSubmatch(line); m != nil {
			sources = append(sources, sourced{path: m[1], line: n})
			continue
		}
		if reHelp.MatchString(line) {
			inHelp, helpIndent = true, -1
			continue
		}
		if m := reDeps.FindStringSubmatch(line); m != nil && cur != nil {
			cur.Depends = append(cur.Depends, reWord.FindAllString(m[1], -1)...)
		}
		if m := reType.FindStringSubmatch(line); m != nil && cur != nil && cur.Type == "" {
			cur.Type = strings.TrimPrefix(m[1], "def_")
		}
	}
	return sources, sc.Err()
}

type sourced struct {
	path string
	line int
}

// indent is a line's indentation in columns, a tab reaching the next
// multiple of 8, as Kconfig counts it.
func indent(s string) int {
	col := 0
	for _, c := range s {
		switch c {
		case ' ':
			col++
		case '\t':
			col += 8 - col%8
		default:
			return col
		}
	}
	return col
}

// validValue reports whether a defconfig value fits a Kconfig type.
func validValue(typ, v string) bool {
	switch typ {
	case "bool":
		return v == "y"
	case "tristate":
		return v == "y" || v == "m"
	case "string":
		return quoted(v)
	case "int":
		return reInt.MatchString(v)
	case "hex":
		return reHex.MatchString(v)
	}
	return true // untyped: nothing to check against
}

// quoted reports whether v is one double-quoted Kconfig string: quotes
// and backslashes inside escaped with a backslash.
func quoted(v string) bool {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return false
	}
	in := v[1 : len(v)-1]
	for i := 0; i < len(in); i++ {
		switch in[i] {
		case '\\':
			if i++; i == len(in) {
				return false
			}
		case '"':
			return false
		}
	}
	return true
}

// unquote undoes quoted.
func unquote(v string) string {
	v = v[1 : len(v)-1]
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' {
			i++
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
