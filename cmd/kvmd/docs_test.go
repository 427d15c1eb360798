package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// configDoc is the manual's page on configuring the daemon: its table
// lists every flag of kvmd serve.
const configDoc = "../../docs/configuration.md"

// docFlag finds the flags a table row's first cell names: "| `--tls-cert
// FILE`, `--tls-key FILE` (...) |" names tls-cert and tls-key.
var docFlag = regexp.MustCompile("`--([a-z0-9-]+)")

// docFlags returns the flags the first column of the page's tables names.
func docFlags(text string) []string {
	var flags []string
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(line, "| `--") {
			continue
		}
		first, _, _ := strings.Cut(line[1:], " | ")
		for _, m := range docFlag.FindAllStringSubmatch(first, -1) {
			flags = append(flags, m[1])
		}
	}
	slices.Sort(flags)
	return slices.Compact(flags)
}

// TestConfigDocFlags checks the flag table of docs/configuration.md
// against kvmd serve -h: every flag documented, none that does not exist.
func TestConfigDocFlags(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := docFlags(string(b))
	_, stderr, err := runKvmd(t, "", "serve", "-h")
	if err != nil {
		t.Fatalf("kvmd serve -h: %v\n%s", err, stderr)
	}
	bin := helpFlags(t, stderr)
	if len(bin) < 10 || len(doc) < 10 {
		t.Fatalf("found %d flags in kvmd serve -h, %d in %s", len(bin), len(doc), configDoc)
	}
	for name := range bin {
		if !slices.Contains(doc, name) {
			t.Errorf("kvmd serve -%s is not in the table of %s", name, configDoc)
		}
	}
	for _, name := range doc {
		if _, ok := bin[name]; !ok {
			t.Errorf("%s documents --%s, which kvmd serve does not have", configDoc, name)
		}
	}
}
