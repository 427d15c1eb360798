package brcheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// VersionFile names the file at the top of the external tree that holds
// the Buildroot release the tree is written for, such as "2026.02.3".
const VersionFile = "BUILDROOT_VERSION"

// Check checks the BR2_EXTERNAL tree at ext and returns its problems,
// sorted. If buildroot is not "", the defconfigs are also checked
// against the Buildroot source tree there. The error is for a tree that
// cannot be read at all.
func Check(ext, buildroot string) ([]Problem, error) {
	ps := &problems{}
	name, err := readDesc(ext, ps)
	if err != nil {
		return nil, err
	}
	extVar := "BR2_EXTERNAL_" + name + "_PATH"
	syms := map[string]*Symbol{}
	scanExternalKconfig(ext, extVar, "Config.in", syms, ps, map[string]bool{})
	pkgs, err := checkPackages(ext, extVar, syms, ps)
	if err != nil {
		return nil, err
	}
	checkExternalMk(ext, extVar, ps)

	var br *release
	if buildroot != "" {
		if br, err = loadRelease(buildroot); err != nil {
			return nil, err
		}
		checkRelease(ext, extVar, br, pkgs, ps)
	}
	defconfigs, _ := filepath.Glob(filepath.Join(ext, "configs", "*_defconfig"))
	if len(defconfigs) == 0 {
		ps.add("configs", 0, "no *_defconfig")
	}
	for _, p := range defconfigs {
		if err := checkDefconfig(ext, extVar, p, syms, pkgs, br, ps); err != nil {
			return nil, err
		}
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		a, b := ps.list[i], ps.list[j]
		if a.File != b.File {
			return a.File < b.File
		}
		return a.Line < b.Line
	})
	return ps.list, nil
}

var reName = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

// readDesc returns the external's name from external.desc.
func readDesc(ext string, ps *problems) (string, error) {
	data, err := os.ReadFile(filepath.Join(ext, "external.desc"))
	if err != nil {
		return "", fmt.Errorf("brcheck: %s is not a BR2_EXTERNAL tree: %w", ext, err)
	}
	var name, desc string
	for i, l := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		k, v, ok := strings.Cut(l, ":")
		switch v = strings.TrimSpace(v); {
		case ok && k == "name":
			name = v
		case ok && k == "desc":
			desc = v
		default:
			ps.add("external.desc", i+1, "only name: and desc: lines belong here, not %q", l)
		}
	}
	if !reName.MatchString(name) {
		ps.add("external.desc", 0, "name %q: letters, digits and _ only", name)
		name = "INVALID"
	}
	if desc == "" {
		ps.add("external.desc", 0, "no desc:")
	}
	return name, nil
}

// scanExternalKconfig reads the external's Kconfig files from rel on,
// following source lines that name files in the tree.
func scanExternalKconfig(ext, extVar, rel string, syms map[string]*Symbol, ps *problems, seen map[string]bool) {
	if seen[rel] {
		return
	}
	seen[rel] = true
	srcs, err := scanKconfig(filepath.Join(ext, rel), rel, syms)
	if err != nil {
		ps.add(rel, 0, "%v", err)
		return
	}
	for _, s := range srcs {
		in, ok := strings.CutPrefix(s.path, "$"+extVar+"/")
		if !ok {
			ps.add(rel, s.line, "source %q: files of this tree are named from $%s", s.path, extVar)
			continue
		}
		if _, err := os.Stat(filepath.Join(ext, in)); err != nil {
			ps.add(rel, s.line, "source %q: no such file", s.path)
			continue
		}
		scanExternalKconfig(ext, extVar, in, syms, ps, seen)
	}
}

// A pkg is one package of the external.
type pkg struct {
	name, prefix string
	mk           *mkFile
}

// checkPackages checks every package/NAME directory: NAME.mk and a
// Config.in, sourced from the tree's, defining BR2_PACKAGE_NAME.
func checkPackages(ext, extVar string, syms map[string]*Symbol, ps *problems) ([]pkg, error) {
	dirs, err := os.ReadDir(filepath.Join(ext, "package"))
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	var out []pkg
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		p := pkg{name: d.Name(), prefix: strings.ToUpper(strings.ReplaceAll(d.Name(), "-", "_"))}
		rel := filepath.Join("package", p.name)
		mkRel := filepath.Join(rel, p.name+".mk")
		mk, err := checkMk(filepath.Join(ext, mkRel), mkRel, p.prefix, ps)
		if err != nil {
			ps.add(mkRel, 0, "missing: every package has NAME.mk")
			continue
		}
		p.mk = mk
		sym := syms["BR2_PACKAGE_"+p.prefix]
		if sym == nil {
			ps.add(filepath.Join(rel, "Config.in"), 0, "BR2_PACKAGE_%s is not defined by the tree's Config.in files", p.prefix)
		}
		if m := mk.vars["SITE_METHOD"]; m != "local" {
			if _, err := os.Stat(filepath.Join(ext, rel, p.name+".hash")); err != nil {
				ps.add(filepath.Join(rel, p.name+".hash"), 0, "missing: a downloaded package needs its hashes")
			}
			if mk.vars["LICENSE"] == "" {
				ps.add(mkRel, 0, "%s_LICENSE is not set", p.prefix)
			}
		}
		if mk.infra == "golang" {
			checkGoPackage(ext, extVar, p, sym, ps)
		}
		out = append(out, p)
	}
	return out, nil
}

// checkGoPackage checks what the golang-package infrastructure needs:
// the Config.in dependency on a Go-capable target, and, for a package
// built from this checkout, its go.mod and build targets.
func checkGoPackage(ext, extVar string, p pkg, sym *Symbol, ps *problems) {
	if sym != nil && !slices.Contains(sym.Depends, "BR2_PACKAGE_HOST_GO_TARGET_ARCH_SUPPORTS") {
		ps.add(sym.File, sym.Line, "a golang-package must depend on BR2_PACKAGE_HOST_GO_TARGET_ARCH_SUPPORTS")
	}
	mkRel := filepath.Join("package", p.name, p.name+".mk")
	src, ok := localSource(ext, extVar, p)
	if !ok {
		return
	}
	mod, _, err := readGoMod(filepath.Join(src, "go.mod"))
	if err != nil {
		ps.add(mkRel, 0, "%s_SITE: %v", p.prefix, err)
		return
	}
	if gomod := p.mk.vars["GOMOD"]; gomod != mod {
		ps.add(mkRel, 0, "%s_GOMOD is %q, go.mod's module is %q", p.prefix, gomod, mod)
	}
	for _, t := range strings.Fields(p.mk.vars["BUILD_TARGETS"]) {
		if gos, _ := filepath.Glob(filepath.Join(src, t, "*.go")); len(gos) == 0 {
			ps.add(mkRel, 0, "%s_BUILD_TARGETS: no Go package at %s", p.prefix, t)
		}
	}
}

// localSource returns the directory of a package built from this
// checkout ($(BR2_EXTERNAL_X_PATH)/... with the local site method).
func localSource(ext, extVar string, p pkg) (string, bool) {
	rel, ok := strings.CutPrefix(p.mk.vars["SITE"], "$("+extVar+")")
	if !ok || p.mk.vars["SITE_METHOD"] != "local" {
		return "", false
	}
	return filepath.Join(ext, rel), true
}

var (
	reModule = regexp.MustCompile(`^module\s+(\S+)`)
	reGo     = regexp.MustCompile(`^go\s+([0-9][0-9.]*)`)
)

// readGoMod returns a go.mod's module path and go version.
func readGoMod(path string) (module, goVersion string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := reModule.FindStringSubmatch(sc.Text()); m != nil {
			module = m[1]
		}
		if m := reGo.FindStringSubmatch(sc.Text()); m != nil {
			goVersion = m[1]
		}
	}
	return module, goVersion, sc.Err()
}

// checkExternalMk checks that external.mk includes the packages' .mk.
func checkExternalMk(ext, extVar string, ps *problems) {
	data, err := os.ReadFile(filepath.Join(ext, "external.mk"))
	if err != nil {
		ps.add("external.mk", 0, "missing")
		return
	}
	if !strings.Contains(string(data), "$("+extVar+")/package/") {
		ps.add("external.mk", 0, "does not include the packages' .mk files from $(%s)/package/", extVar)
	}
}

// checkDefconfig checks one defconfig: its syntax, the files it names,
// the external's symbols, and with a release, every symbol.
func checkDefconfig(ext, extVar, path string, syms map[string]*Symbol, pkgs []pkg, br *release, ps *problems) error {
	name, _ := filepath.Rel(ext, path)
	settings, err := parseDefconfig(path, name, ps)
	if err != nil {
		return err
	}
	enables := false
	for _, s := range settings {
		sym := syms[s.sym]
		if br != nil && sym == nil {
			sym = br.syms[s.sym]
		}
		for _, p := range pkgs {
			if s.sym == "BR2_PACKAGE_"+p.prefix && s.value == "y" {
				enables = true
			}
			if strings.HasPrefix(s.sym, "BR2_PACKAGE_"+p.prefix+"_") || s.sym == "BR2_PACKAGE_"+p.prefix {
				if syms[s.sym] == nil {
					ps.add(name, s.line, "%s: no such option in this tree's Config.in files", s.sym)
				}
			}
		}
		switch {
		case br == nil:
		case sym == nil:
			ps.add(name, s.line, "%s: no such option in Buildroot %s", s.sym, br.version)
		case s.unset:
		case sym.Legacy:
			ps.add(name, s.line, "%s: a legacy option of Buildroot %s (removed; %s:%d)", s.sym, br.version, sym.File, sym.Line)
		case !validValue(sym.Type, s.value):
			ps.add(name, s.line, "%s=%s: not a %s value", s.sym, s.value, sym.Type)
		}
		if !s.unset && pathSymbol(s.sym) && quoted(s.value) {
			checkPaths(ext, extVar, name, s, br, ps)
		}
	}
	if len(pkgs) > 0 && !enables {
		ps.add(name, 0, "enables none of this tree's packages")
	}
	return nil
}

// checkPaths checks the files a path option names: in this tree, or,
// relative to Buildroot's top directory, in the release when known.
// Scripts must be executable.
func checkPaths(ext, extVar, name string, s setting, br *release, ps *problems) {
	for _, p := range strings.Fields(unquote(s.value)) {
		var full string
		if rel, ok := strings.CutPrefix(p, "$("+extVar+")/"); ok {
			full = filepath.Join(ext, rel)
		} else if strings.Contains(p, "$(") {
			ps.add(name, s.line, "%s: %s: only $(%s) can be resolved here", s.sym, p, extVar)
			continue
		} else if !filepath.IsAbs(p) && br != nil {
			full = filepath.Join(br.dir, p)
		} else {
			continue
		}
		fi, err := os.Stat(full)
		switch {
		case err != nil:
			ps.add(name, s.line, "%s: %s does not exist", s.sym, p)
		case strings.HasSuffix(s.sym, "_SCRIPT") && fi.Mode()&0o111 == 0:
			ps.add(name, s.line, "%s: %s is not executable", s.sym, p)
		}
	}
}

// A release is a Buildroot source tree: its version, its symbols.
type release struct {
	dir, version, goVersion string
	syms                    map[string]*Symbol
}

var (
	reBRVersion = regexp.MustCompile(`(?m)^export BR2_VERSION\s*:=\s*(\S+)`)
	reGoVersion = regexp.MustCompile(`(?m)^GO_VERSION\s*=\s*(\S+)`)
)

// loadRelease reads a Buildroot source tree: every Kconfig file in it
// (Config.in, Config.in.*, Config.*.in), its version from the top
// Makefile and its Go toolchain's version.
func loadRelease(dir string) (*release, error) {
	mf, err := os.ReadFile(filepath.Join(dir, "Makefile"))
	if err != nil {
		return nil, fmt.Errorf("brcheck: %s is not a Buildroot tree: %w", dir, err)
	}
	m := reBRVersion.FindSubmatch(mf)
	if m == nil {
		return nil, fmt.Errorf("brcheck: %s/Makefile sets no BR2_VERSION", dir)
	}
	br := &release{dir: dir, version: string(m[1]), syms: map[string]*Symbol{}}
	if gomk, err := os.ReadFile(filepath.Join(dir, "package", "go", "go.mk")); err == nil {
		if m := reGoVersion.FindSubmatch(gomk); m != nil {
			br.goVersion = string(m[1])
		}
	}
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "output" || d.Name() == "dl" || strings.HasPrefix(d.Name(), ".")) && p != dir {
			return filepath.SkipDir
		}
		n := d.Name()
		if d.Type().IsRegular() && (n == "Config.in" || strings.HasPrefix(n, "Config.in.") || (strings.HasPrefix(n, "Config.") && strings.HasSuffix(n, ".in"))) {
			rel, _ := filepath.Rel(dir, p)
			_, err = scanKconfig(p, rel, br.syms)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("brcheck: reading %s: %w", dir, err)
	}
	return br, nil
}

// checkRelease compares the release with the one the tree pins, and its
// Go toolchain with what each Go package's go.mod asks for (the build
// runs with GOTOOLCHAIN=local: a newer go line fails it).
func checkRelease(ext, extVar string, br *release, pkgs []pkg, ps *problems) {
	pinned, err := os.ReadFile(filepath.Join(ext, VersionFile))
	switch {
	case err != nil:
		ps.add(VersionFile, 0, "missing: the Buildroot release this tree is written for")
	case strings.TrimSpace(string(pinned)) != br.version:
		ps.add(VersionFile, 0, "the tree pins Buildroot %s, checked against %s", strings.TrimSpace(string(pinned)), br.version)
	}
	for _, p := range pkgs {
		src, ok := localSource(ext, extVar, p)
		if p.mk.infra != "golang" || !ok {
			continue
		}
		_, want, err := readGoMod(filepath.Join(src, "go.mod"))
		if err == nil && want != "" && versionLess(br.goVersion, want) {
			ps.add(filepath.Join("package", p.name, p.name+".mk"), 0,
				"go.mod asks for go %s, Buildroot %s builds with go %q", want, br.version, br.goVersion)
		}
	}
}

// versionLess compares dotted decimal versions ("1.26.3" < "1.27");
// an empty or unparsable a is less than anything.
func versionLess(a, b string) bool {
	as, bs := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(as) || i < len(bs); i++ {
		x, y := 0, 0
		if i < len(as) {
			n, err := strconv.Atoi(as[i])
			if err != nil {
				return true
			}
			x = n
		}
		if i < len(bs) {
			y, _ = strconv.Atoi(bs[i])
		}
		if x != y {
			return x < y
		}
	}
	return false
}
