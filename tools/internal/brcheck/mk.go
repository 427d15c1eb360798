package brcheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// mkVars are the variables Buildroot's package infrastructures read,
// without the package prefix (the generic, Go and make-based ones this
// tree can use; the hook lists are matched by hookList).
var mkVars = set(`
		VERSION SOURCE SITE SITE_METHOD SUBDIR STRIP_COMPONENTS EXTRA_DOWNLOADS
		PATCH DL_OPTS DL_ENV DL_DIR DEPENDENCIES EXTRACT_DEPENDENCIES
		PATCH_DEPENDENCIES DOWNLOAD_DEPENDENCIES INSTALL_STAGING INSTALL_TARGET
		INSTALL_IMAGES LICENSE LICENSE_FILES REDISTRIBUTE CPE_ID_VENDOR
		CPE_ID_PRODUCT CPE_ID_VERSION CPE_ID_UPDATE CPE_ID_VALID IGNORE_CVES
		BIN_ARCH_EXCLUDE OVERRIDE_SRCDIR OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS
		GIT_SUBMODULES GIT_LFS PROVIDES ACTUAL_SOURCE_TARBALL ACTUAL_SOURCE_SITE
		CONFIGURE_CMDS BUILD_CMDS INSTALL_CMDS INSTALL_STAGING_CMDS
		INSTALL_TARGET_CMDS INSTALL_IMAGES_CMDS INSTALL_INIT_SYSV
		INSTALL_INIT_OPENRC INSTALL_INIT_SYSTEMD USERS GROUPS PERMISSIONS
		DEVICES LINUX_CONFIG_FIXUPS MAKE_ENV MAKE_OPTS CONF_ENV CONF_OPTS
		GOMOD LDFLAGS EXTLDFLAGS TAGS BUILD_TARGETS BIN_NAME GO_ENV BUILD_OPTS`)

func set(words string) map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(words) {
		m[w] = true
	}
	return m
}

var (
	reHookList = regexp.MustCompile(`^(PRE|POST)_(DOWNLOAD|EXTRACT|RSYNC|PATCH|CONFIGURE|BUILD|INSTALL|INSTALL_STAGING|INSTALL_TARGET|INSTALL_IMAGES|LEGAL_INFO)_HOOKS$|^(TARGET_FINALIZE|ROOTFS_PRE_CMD)_HOOKS$`)
	reAssign   = regexp.MustCompile(`^([A-Za-z0-9_]+)\s*(\+=|\?=|:=|=)\s*(.*)$`)
	reDefine   = regexp.MustCompile(`^define\s+([A-Za-z0-9_]+)\s*$`)
	reEval     = regexp.MustCompile(`^\$\(eval \$\((host-)?([a-z0-9-]+)-package\)\)$`)
	reCond     = regexp.MustCompile(`^(ifeq|ifneq|ifdef|ifndef)\b`)
	infras     = set("generic autotools cmake meson golang cargo python perl kernel-module kconfig qmake waf luarocks rebar virtual")
)

// mkFile is what checkMk learned of a package's .mk: its variables and
// the infrastructure it uses.
type mkFile struct {
	vars  map[string]string // top-level assignments, last value
	infra string            // "golang" for $(eval $(golang-package))
}

// checkMk checks one package's .mk: pkg is the package's name (the
// directory's), prefix its variables' prefix (KVMD for kvmd).
func checkMk(path, name, prefix string, ps *problems) (*mkFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	mk := &mkFile{vars: map[string]string{}}
	defined := map[string]int{} // define blocks
	var hooks []struct {
		name string
		line int
	}
	var conds []int // lines of open ifeq/ifdef
	evalLine, inDefine, lastLine := 0, 0, 0
	lines := logicalLines(string(data))
	for _, ll := range lines {
		n, line := ll.n, ll.text
		t := strings.TrimSpace(line)
		if inDefine > 0 {
			if t == "endef" {
				inDefine = 0
			}
			continue
		}
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		lastLine = n
		if !balanced(t) {
			ps.add(name, n, "unbalanced $( ) in %q", t)
		}
		switch {
		case reDefine.MatchString(t):
			v := reDefine.FindStringSubmatch(t)[1]
			defined[v] = n
			checkVarName(v, prefix, name, n, ps)
			inDefine = n
		case t == "endef":
			ps.add(name, n, "endef without define")
		case reCond.MatchString(t):
			conds = append(conds, n)
		case t == "else" || strings.HasPrefix(t, "else "):
			if len(conds) == 0 {
				ps.add(name, n, "else without if")
			}
		case t == "endif":
			if len(conds) == 0 {
				ps.add(name, n, "endif without if")
			} else {
				conds = conds[:len(conds)-1]
			}
		case reEval.MatchString(t):
			m := reEval.FindStringSubmatch(t)
			if evalLine > 0 {
				ps.add(name, n, "second package infrastructure call (first on line %d)", evalLine)
			}
			evalLine = n
			if !infras[m[2]] {
				ps.add(name, n, "no Buildroot infrastructure %q", m[2]+"-package")
			}
			mk.infra = m[2]
		case reAssign.MatchString(t):
			m := reAssign.FindStringSubmatch(t)
			checkVarName(m[1], prefix, name, n, ps)
			if reHookList.MatchString(strings.TrimPrefix(m[1], prefix+"_")) {
				for _, h := range strings.Fields(m[3]) {
					hooks = append(hooks, struct {
						name string
						line int
					}{h, n})
				}
			}
			mk.vars[strings.TrimPrefix(m[1], prefix+"_")] = m[3]
		case strings.HasPrefix(t, "include "):
		default:
			ps.add(name, n, "neither an assignment, a define, a conditional nor the infrastructure call: %q", t)
		}
	}
	if inDefine > 0 {
		ps.add(name, inDefine, "define without endef")
	}
	for _, c := range conds {
		ps.add(name, c, "conditional without endif")
	}
	for _, h := range hooks {
		if _, ok := defined[h.name]; !ok {
			ps.add(name, h.line, "hook %s is not defined", h.name)
		}
	}
	// Custom variables are fine when the file uses them.
	for v, n := range defined {
		used := false
		for _, h := range hooks {
			used = used || h.name == v
		}
		if !used && !mkVars[strings.TrimPrefix(v, prefix+"_")] && !strings.Contains(string(data), "$("+v+")") {
			ps.add(name, n, "%s is neither a variable Buildroot reads nor used in this file", v)
		}
	}
	for v := range mk.vars {
		full := prefix + "_" + v
		if !mkVars[v] && !reHookList.MatchString(v) && !strings.Contains(string(data), "$("+full+")") {
			ps.add(name, 0, "%s is neither a variable Buildroot reads nor used in this file", full)
		}
	}
	switch {
	case evalLine == 0:
		ps.add(name, 0, "no package infrastructure call such as $(eval $(generic-package))")
	case evalLine != lastLine:
		ps.add(name, evalLine, "the infrastructure call must come last")
	}
	for _, v := range []string{"VERSION", "SITE"} {
		if _, ok := mk.vars[v]; !ok {
			ps.add(name, 0, "%s_%s is not set", prefix, v)
		}
	}
	return mk, nil
}

// checkVarName reports a variable outside the package's namespace.
func checkVarName(v, prefix, name string, n int, ps *problems) {
	if !strings.HasPrefix(v, prefix+"_") && !strings.HasPrefix(v, "HOST_"+prefix+"_") {
		ps.add(name, n, "%s is outside the package's namespace %s_", v, prefix)
	}
}

type logicalLine struct {
	n    int // first physical line
	text string
}

// logicalLines joins backslash-continued lines, as make reads them.
func logicalLines(s string) []logicalLine {
	var out []logicalLine
	var cur strings.Builder
	start := 0
	for i, l := range strings.Split(s, "\n") {
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(l, `\`) {
			cur.WriteString(strings.TrimSuffix(l, `\`))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(l)
		out = append(out, logicalLine{n: start, text: cur.String()})
		cur.Reset()
	}
	return out
}

// balanced reports whether every $( and ( in a make line is closed.
func balanced(s string) bool {
	depth := 0
	for _, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			if depth--; depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// PackageVars returns the variables a package's .mk sets at its top
// level, without the package prefix (VERSION, LDFLAGS, ...), as written.
func PackageVars(mkPath string) (map[string]string, error) {
	name := strings.TrimSuffix(filepath.Base(mkPath), ".mk")
	mk, err := checkMk(mkPath, name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")), &problems{})
	if err != nil {
		return nil, err
	}
	return mk.vars, nil
}
