package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvmd/daemon"
	"kvmd/internal/testutil"
)

// manPage is the manual page scripts/mkdeb.sh installs as kvmd(8).
const manPage = "../../man/kvmd.8"

// manEntry is one tagged paragraph (.TP) of the page: the tag line and the
// lines of its body, with the section (.SH) and subsection (.SS) it is in.
type manEntry struct {
	section, sub string
	tag          string
	body         []string
}

// parseMan returns the tagged paragraphs of a man(7) page. A paragraph
// ends at the next .TP, .PP, .SS or .SH.
func parseMan(text string) []manEntry {
	var (
		entries      []manEntry
		section, sub string
		cur          = -1 // the entry whose body this is, if any
		wantTag      bool
	)
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(line, `.\"`) {
			continue
		}
		if wantTag {
			entries = append(entries, manEntry{section: section, sub: sub, tag: line})
			cur, wantTag = len(entries)-1, false
			continue
		}
		var name, args string
		if strings.HasPrefix(line, ".") {
			name, args, _ = strings.Cut(line[1:], " ")
		}
		switch name {
		case "SH", "SS":
			title := unroff(strings.Join(macroArgs(args), " "))
			if name == "SH" {
				section, sub = title, ""
			} else {
				sub = title
			}
			cur = -1
			continue
		case "TP":
			wantTag = true
			continue
		case "PP", "P", "LP":
			cur = -1
			continue
		}
		if cur >= 0 {
			entries[cur].body = append(entries[cur].body, line)
		}
	}
	return entries
}

// macroArgs splits the arguments of a macro line as roff does: at blanks,
// but for double-quoted arguments (where "" is a quote) and escaped blanks.
func macroArgs(s string) []string {
	var args []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return args
		}
		if s[0] == '"' {
			var b strings.Builder
			i := 1
			for ; i < len(s); i++ {
				if s[i] == '"' {
					if i+1 < len(s) && s[i+1] == '"' {
						b.WriteByte('"')
						i++
						continue
					}
					i++
					break
				}
				b.WriteByte(s[i])
			}
			args, s = append(args, b.String()), s[i:]
			continue
		}
		i := 0
		for i < len(s) && s[i] != ' ' && s[i] != '\t' {
			if s[i] == '\\' {
				i++
			}
			i++
		}
		i = min(i, len(s))
		args, s = append(args, s[:i]), s[i:]
	}
}

// roffEscapes are the escapes the page uses, as plain text.
var roffEscapes = strings.NewReplacer(`\-`, "-", `\e`, `\`, `\&`, "", `\ `, " ", `\(aq`, "'",
	`\fB`, "", `\fI`, "", `\fR`, "", `\fP`, "")

func unroff(s string) string { return roffEscapes.Replace(s) }

// boldLead returns the plain text of the bold arguments a font macro line
// (.B, .BI, .BR, ...) starts with: the command or option it names.
func boldLead(tag string) (string, bool) {
	name, args, _ := strings.Cut(strings.TrimPrefix(tag, "."), " ")
	if !strings.HasPrefix(tag, ".") || !slices.Contains([]string{"B", "BI", "BR"}, name) {
		return "", false
	}
	a := macroArgs(args)
	if len(a) == 0 {
		return "", false
	}
	if name == "B" {
		return unroff(strings.Join(a, " ")), true
	}
	return unroff(a[0]), true // alternating fonts: the first is bold
}

// boldRuns returns the plain text of each \fB...\fR run in a text line.
var boldRun = regexp.MustCompile(`\\fB(.*?)\\f[RP]`)

func boldRuns(line string) []string {
	var runs []string
	for _, m := range boldRun.FindAllStringSubmatch(line, -1) {
		runs = append(runs, unroff(m[1]))
	}
	return runs
}

func readMan(t *testing.T) []manEntry {
	t.Helper()
	b, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatal(err)
	}
	return parseMan(string(b))
}

// usageCommand finds "kvmd CMD" or "kvmd CMD ACTION|ACTION..." in a usage.
var usageCommand = regexp.MustCompile(`kvmd ([a-z]+)(?: ([a-z]+(?:\|[a-z]+)*))?\b`)

// binaryCommands returns the commands the binary's usages name, as "user
// add": the top level's (kvmd help), and the actions of those that have
// actions (kvmd user -h).
func binaryCommands(t *testing.T) []string {
	t.Helper()
	top, _, err := runKvmd(t, "", "help")
	if err != nil {
		t.Fatalf("kvmd help: %v", err)
	}
	usages := top
	for _, m := range usageCommand.FindAllStringSubmatch(top, -1) {
		if m[2] != "" {
			_, sub, err := runKvmd(t, "", m[1], "-h")
			if err != nil {
				t.Fatalf("kvmd %s -h: %v", m[1], err)
			}
			usages += sub
		}
	}
	var cmds []string
	for _, m := range usageCommand.FindAllStringSubmatch(usages, -1) {
		if m[2] == "" {
			cmds = append(cmds, m[1])
		}
		for a := range strings.SplitSeq(m[2], "|") {
			if a != "" {
				cmds = append(cmds, m[1]+" "+a)
			}
		}
	}
	slices.Sort(cmds)
	return slices.Compact(cmds)
}

// manCommands returns the commands in the page's COMMANDS section: the
// bold words each tag starts with, up to the first option.
func manCommands(t *testing.T, entries []manEntry) []string {
	t.Helper()
	var cmds []string
	for _, e := range entries {
		if e.section != "COMMANDS" {
			continue
		}
		lead, ok := boldLead(e.tag)
		if !ok {
			t.Errorf("COMMANDS: tag %q does not start with a bold command", e.tag)
			continue
		}
		var words []string
		for _, w := range strings.Fields(lead) {
			if strings.HasPrefix(w, "-") {
				break
			}
			words = append(words, w)
		}
		cmds = append(cmds, strings.Join(words, " "))
	}
	return cmds
}

// TestManCommands checks that the page documents every command the
// binary's usage lists, and that every command it documents runs.
func TestManCommands(t *testing.T) {
	entries := readMan(t)
	got := manCommands(t, entries)
	want := binaryCommands(t)
	if len(want) < 5 {
		t.Fatalf("found only %q in the binary's usage", want)
	}
	for _, c := range want {
		if !slices.Contains(got, c) {
			t.Errorf("the page lacks the command %q of the binary's usage", c)
		}
	}
	for _, c := range got {
		// Every command, "help" and "version" too, takes -h: an exit
		// status other than 0 is an unknown command (2) or action (1).
		if _, stderr, err := runKvmd(t, "", append(strings.Fields(c), "-h")...); err != nil {
			t.Errorf("the page documents %q, but kvmd %s -h: %v\n%s", c, c, err, stderr)
		}
	}
}

// flagDefault finds the default flag.PrintDefaults adds to a usage.
var flagDefault = regexp.MustCompile(`\(default ([^()]*)\)$`)

// binaryFlag is a flag of the binary, with its default ("" for none).
type binaryFlag struct{ def string }

// helpFlags returns the flags in the -h output of a command.
func helpFlags(t *testing.T, out string) map[string]binaryFlag {
	t.Helper()
	flags := map[string]binaryFlag{}
	var name string
	var usage []string
	done := func() {
		if name == "" {
			return
		}
		var f binaryFlag
		if m := flagDefault.FindStringSubmatch(strings.Join(usage, " ")); m != nil {
			f.def = m[1]
			if uq, err := strconv.Unquote(f.def); err == nil {
				f.def = uq
			}
		}
		flags[name] = f
		name, usage = "", nil
	}
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "  -"):
			done()
			// "  -name type", "  -f\tusage"
			head, rest, _ := strings.Cut(line[3:], "\t")
			name = strings.Fields(head)[0]
			usage = append(usage, rest)
		case strings.HasPrefix(line, "    \t") && name != "":
			usage = append(usage, strings.TrimSpace(line))
		default:
			done()
		}
	}
	done()
	return flags
}

// manOption is an option as the page documents it.
type manOption struct {
	def    string // the "Default:" line's bold values, joined with commas
	hasDef bool
	key    string // the "Config key:" line's key
}

// manOptions returns the options of the page's OPTIONS section by
// subsection (the command they belong to).
func manOptions(t *testing.T, entries []manEntry) map[string]map[string]manOption {
	t.Helper()
	opts := map[string]map[string]manOption{}
	for _, e := range entries {
		if e.section != "OPTIONS" {
			continue
		}
		lead, ok := boldLead(e.tag)
		name := strings.TrimSpace(lead)
		if !ok || !strings.HasPrefix(name, "-") || strings.ContainsAny(name, " =,") {
			t.Errorf("OPTIONS: tag %q does not name one option", e.tag)
			continue
		}
		name = strings.TrimLeft(name, "-")
		var o manOption
		for _, l := range e.body {
			switch {
			case strings.HasPrefix(l, "Default:"):
				runs := boldRuns(l)
				if len(runs) == 0 || o.hasDef {
					t.Errorf("OPTIONS %s -%s: bad default line %q", e.sub, name, l)
				}
				o.def, o.hasDef = strings.Join(runs, ","), true
			case strings.HasPrefix(l, "Config key:"):
				runs := boldRuns(l)
				if len(runs) == 0 || o.key != "" {
					t.Errorf("OPTIONS %s -%s: bad config key line %q", e.sub, name, l)
				} else {
					o.key = runs[0]
				}
			}
		}
		if opts[e.sub] == nil {
			opts[e.sub] = map[string]manOption{}
		}
		if _, dup := opts[e.sub][name]; dup {
			t.Errorf("OPTIONS %s: -%s twice", e.sub, name)
		}
		opts[e.sub][name] = o
	}
	return opts
}

// sameDefault compares a default of the binary with the page's, where a
// duration may be written shorter (24h for 24h0m0s).
func sameDefault(bin, man string) bool {
	if bin == man {
		return true
	}
	a, errA := time.ParseDuration(bin)
	b, errB := time.ParseDuration(man)
	return errA == nil && errB == nil && a == b
}

// TestManOptions checks the OPTIONS section against the -h output of
// every command: the same options under each command's subsection, with
// the same defaults, and serve's config keys those of Config.
func TestManOptions(t *testing.T) {
	entries := readMan(t)
	man := manOptions(t, entries)

	// The binary's flags, by the command's first word: "user" holds the
	// flags of user list, add, set and del.
	bin := map[string]map[string]binaryFlag{}
	for _, c := range binaryCommands(t) {
		args := append(strings.Fields(c), "-h")
		_, stderr, err := runKvmd(t, "", args...)
		if err != nil {
			t.Fatalf("kvmd %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		group := strings.Fields(c)[0]
		for name, f := range helpFlags(t, stderr) {
			if bin[group] == nil {
				bin[group] = map[string]binaryFlag{}
			}
			if old, ok := bin[group][name]; ok && old != f {
				t.Errorf("kvmd %s: -%s has default %q, another %s command %q", c, name, f.def, group, old.def)
			}
			bin[group][name] = f
		}
	}
	if len(bin["serve"]) < 10 {
		t.Fatalf("found only %d flags in kvmd serve -h", len(bin["serve"]))
	}

	for group, flags := range bin {
		for name, f := range flags {
			o, ok := man[group][name]
			switch {
			case !ok:
				t.Errorf("kvmd %s -%s is not in the page's OPTIONS, subsection %s", group, name, group)
			case f.def == "" && o.hasDef:
				t.Errorf("kvmd %s -%s: the page gives the default %q; the binary has none", group, name, o.def)
			case f.def != "" && !o.hasDef:
				t.Errorf("kvmd %s -%s: the page gives no default; the binary's is %q", group, name, f.def)
			case !sameDefault(f.def, o.def):
				t.Errorf("kvmd %s -%s: the page's default is %q, the binary's %q", group, name, o.def, f.def)
			}
		}
	}
	for group, opts := range man {
		for name := range opts {
			if _, ok := bin[group][name]; !ok {
				t.Errorf("the page documents -%s under %s, but kvmd %s has no such flag", name, group, group)
			}
		}
	}

	// serve's options name their config keys: each key of Config once,
	// and every option but --config has one.
	var keys []string
	ct := reflect.TypeFor[daemon.Config]()
	for i := range ct.NumField() {
		keys = append(keys, strings.Split(ct.Field(i).Tag.Get("yaml"), ",")[0])
	}
	var documented []string
	for name, o := range man["serve"] {
		switch {
		case name == "config" && o.key != "":
			t.Errorf("serve --config: a config key %q, but it is not one", o.key)
		case name != "config" && o.key == "":
			t.Errorf("serve --%s: no \"Config key:\" line", name)
		case o.key != "":
			documented = append(documented, o.key)
		}
	}
	slices.Sort(keys)
	slices.Sort(documented)
	if !slices.Equal(keys, documented) {
		t.Errorf("config keys in the page:\n%q\nwant those of Config:\n%q", documented, keys)
	}
}

// TestManParse checks the parser the tests above rely on, on a page that
// is wrong in the ways they must catch.
func TestManParse(t *testing.T) {
	page := `.TH X 8
.SH COMMANDS
.TP
.BI "user add " name " \-\-users " file
Add.
.SH OPTIONS
.SS serve
.TP
.BI \-\-log\-unit " pattern"
Units.
Config key: \fBlog\-units\fR (a list).
Default: \fBkvmd.service\fR, \fBkvmd\-*.service\fR.
.PP
Default: \fBnot this\fR.
.TP
.B \-f
`
	entries := parseMan(page)
	if got := manCommands(t, entries); !slices.Equal(got, []string{"user add"}) {
		t.Errorf("commands: %q", got)
	}
	got := manOptions(t, entries)["serve"]
	want := map[string]manOption{
		"log-unit": {def: "kvmd.service,kvmd-*.service", hasDef: true, key: "log-units"},
		"f":        {},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("options: %+v, want %+v", got, want)
	}
	help := "Usage:\n  -f\treplace\n  -listen addr\n    \tlisten (repeatable) (default 127.0.0.1:8080)\n" +
		"  -meta file\n    \tmeta (default \"/etc/kvmd/meta.yaml\")\n  -users file\n    \tusers\n"
	flags := helpFlags(t, help)
	wantFlags := map[string]binaryFlag{"f": {}, "listen": {"127.0.0.1:8080"}, "meta": {"/etc/kvmd/meta.yaml"}, "users": {}}
	if !reflect.DeepEqual(flags, wantFlags) {
		t.Errorf("help flags: %+v, want %+v", flags, wantFlags)
	}
	if !sameDefault("24h0m0s", "24h") || sameDefault("24h0m0s", "12h") || sameDefault("a", "b") {
		t.Error("sameDefault")
	}
}

// TestManLint lints the page with mandoc and with groff (what man renders
// it with, and lintian checks it with): any message fails.
func TestManLint(t *testing.T) {
	page, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatal(err)
	}
	// A page with an undefined macro and a bad font escape: each linter
	// must say so, or a clean result means nothing.
	bad := filepath.Join(t.TempDir(), "bad.8")
	if err := os.WriteFile(bad, append(page, ".XY undefined\nA \\fQbad\\fR font.\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct {
		name, pkg string
		args      []string
	}{
		{"mandoc", "mandoc", []string{"-T", "lint", "-W", "warning"}},
		{"groff", "groff-base", []string{"-man", "-Tutf8", "-ww", "-z"}},
	} {
		t.Run(l.name, func(t *testing.T) {
			bin := testutil.NeedTool(t, l.pkg, l.name)
			lint := func(path string) (string, error) {
				out, err := exec.Command(bin, append(l.args, path)...).CombinedOutput()
				return strings.TrimSpace(string(out)), err
			}
			if out, err := lint(manPage); err != nil || out != "" {
				t.Errorf("%s %s: %v\n%s", l.name, strings.Join(l.args, " "), err, out)
			}
			out, err := lint(bad)
			var ee *exec.ExitError
			if out == "" || (err != nil && !errors.As(err, &ee)) {
				t.Errorf("%s finds nothing wrong in a broken page (%v)", l.name, err)
			}
		})
	}
}
