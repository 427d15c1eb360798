package brcheck

import (
	"bufio"
	"os"
	"regexp"
	"strings"
)

// A setting is one line of a defconfig: SYM=value, or "# SYM is not set".
type setting struct {
	sym   string
	value string // as written, quotes included; "" when unset
	unset bool
	line  int
}

var (
	reSet   = regexp.MustCompile(`^([A-Za-z0-9_]+)=(.*)$`)
	reUnset = regexp.MustCompile(`^# ([A-Za-z0-9_]+) is not set$`)
)

// parseDefconfig reads a defconfig's settings, reporting lines that are
// neither a setting, a comment nor blank, and symbols set twice.
func parseDefconfig(path, name string, ps *problems) ([]setting, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []setting
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		var s setting
		if m := reUnset.FindStringSubmatch(line); m != nil {
			s = setting{sym: m[1], unset: true, line: n}
		} else if m := reSet.FindStringSubmatch(line); m != nil {
			s = setting{sym: m[1], value: m[2], line: n}
		} else if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") {
			continue
		} else {
			ps.add(name, n, "not a setting: %q", line)
			continue
		}
		if !strings.HasPrefix(s.sym, "BR2_") {
			ps.add(name, n, "%s: Buildroot's options start with BR2_", s.sym)
		}
		if prev, ok := seen[s.sym]; ok {
			ps.add(name, n, "%s set again (first on line %d)", s.sym, prev)
		}
		seen[s.sym] = n
		if !s.unset && strings.HasPrefix(s.value, `"`) && !quoted(s.value) {
			ps.add(name, n, "%s: badly quoted string %s", s.sym, s.value)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// pathSymbol reports whether an option's value is a list of paths
// (files or directories Buildroot reads).
func pathSymbol(sym string) bool {
	for _, suf := range []string{"_FILE", "_FILES", "_SCRIPT", "_DIR", "_OVERLAY", "_TABLE", "_TABLES"} {
		if strings.HasSuffix(sym, suf) {
			return true
		}
	}
	return false
}
