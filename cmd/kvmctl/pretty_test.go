package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestWritePretty(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"order kept, nesting", `{"z": 1, "a": {"b": {"c": "deep"}, "d": 2.50}}`,
			"z: 1\na:\n  b:\n    c: deep\n  d: 2.50\n"},
		{"scalars", `{"t": true, "f": false, "n": null, "s": "a b"}`,
			"t: true\nf: false\nn: null\ns: a b\n"},
		{"quoted where misread", `{"e": "", "sp": " x", "nl": "a\nb", "null": "null", "tab": "a\tb", "": 1}`,
			"e: \"\"\nsp: \" x\"\nnl: \"a\\nb\"\nnull: \"null\"\ntab: \"a\\tb\"\n\"\": 1\n"},
		{"empty containers", `{"o": {}, "a": []}`, "o: {}\na: []\n"},
		{"list of scalars", `{"l": [1, "two", null]}`, "l:\n  - 1\n  - two\n  - null\n"},
		{"list of objects", `{"fns": [{"name": "hid", "kind": "kbd"}, {"name": "msd", "opts": {"ro": true}}]}`,
			"fns:\n  - name: hid\n    kind: kbd\n  - name: msd\n    opts:\n      ro: true\n"},
		{"list of lists", `[[1, 2], []]`, "- - 1\n  - 2\n- []\n"},
		{"top-level scalar", `"just text"`, "just text\n"},
		{"unicode kept", `{"msg": "Zürich → 東京"}`, "msg: Zürich → 東京\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writePretty(&b, []byte(tc.in)); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.want {
				t.Errorf("(-want +got)\n-%s\n+%s", strings.ReplaceAll(tc.want, "\n", "\n-"), strings.ReplaceAll(got, "\n", "\n+"))
			}
		})
	}
	for _, bad := range []string{`{"a": `, `{} {}`, `nope`} {
		if err := writePretty(&bytes.Buffer{}, []byte(bad)); err == nil {
			t.Errorf("writePretty(%q) accepted it", bad)
		}
	}
}

func TestLFWriter(t *testing.T) {
	in := "a\r\nb\r\r\nc\rd\r\n\r"
	want := "a\nb\r\nc\rd\n\r"
	// Every split of the input into two writes gives the same output.
	for i := 0; i <= len(in); i++ {
		var b bytes.Buffer
		w := &lfWriter{w: &b}
		w.Write([]byte(in[:i]))
		w.Write([]byte(in[i:]))
		w.Close()
		if b.String() != want {
			t.Errorf("split at %d: %q, want %q", i, b.String(), want)
		}
	}
}

func TestParseArgs(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	home := t.TempDir()
	base := map[string]string{"HOME": home, "KVMCTL_URL": "kvm.local/", "KVMCTL_USER": "admin"}

	o, err := parseArgs([]string{"--user", "bob", "log", "-f", "--seek", "90", "--insecure"}, env(base))
	if err != nil {
		t.Fatal(err)
	}
	if o.cmd != "log" || !o.follow || o.seek != 90 || !o.insecure || o.user != "bob" || o.url != "https://kvm.local" {
		t.Errorf("parsed %+v", o)
	}
	if want := home + "/.local/state/kvmctl/sessions.json"; o.sessionsPath != want {
		t.Errorf("sessions at %s, want %s", o.sessionsPath, want)
	}
	// A global flag after the command does not undo one before it.
	o, err = parseArgs([]string{"--url", "http://a:1", "info", "--fields", " hw, ,auth", "--json"}, env(base))
	if err != nil {
		t.Fatal(err)
	}
	if o.url != "http://a:1" || !o.json || strings.Join(o.fields, "|") != "hw|auth" {
		t.Errorf("parsed %+v", o)
	}
	o, _ = parseArgs([]string{"check"}, env(map[string]string{"KVMCTL_URL": "unix:/run/kvmd/kvmd.sock"}))
	if o.url != "unix:/run/kvmd/kvmd.sock" || o.sessionsPath != "" {
		t.Errorf("parsed %+v", o)
	}
}
