package metrics

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestRulesUseExportedNames: every kvmd_* series the shipped alert rules
// (prometheus/kvmd.rules.yml) select is one the daemon writes on some
// board of the golden files, with the label values they match, so that a
// renamed metric or label breaks this test rather than silently the
// alerts of a fleet. promtool test rules (make rules) tests what the
// rules do with those series.
func TestRulesUseExportedNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "prometheus", "kvmd.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}

	// The samples of every golden file, by family: their label sets.
	goldens, _ := filepath.Glob(filepath.Join("testdata", "*.prom"))
	if len(goldens) == 0 {
		t.Fatal("no golden files")
	}
	samples := map[string][]string{}
	sample := regexp.MustCompile(`(?m)^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? `)
	for _, g := range goldens {
		out, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range sample.FindAllStringSubmatch(string(out), -1) {
			samples[m[1]] = append(samples[m[1]], m[2])
		}
	}

	selector := regexp.MustCompile(`\b(kvmd_[a-z0-9_]+)(\{([^}]*)\})?`)
	matcher := regexp.MustCompile(`([a-z_]+)\s*(=~|=)\s*"([^"]*)"`)
	checked := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			for _, sel := range selector.FindAllStringSubmatch(r.Expr, -1) {
				name := sel[1]
				labelSets, ok := samples[name]
				if !ok {
					t.Errorf("%s: %s is not written on any board (metrics/testdata)", r.Alert, name)
					continue
				}
				checked++
				for _, m := range matcher.FindAllStringSubmatch(sel[3], -1) {
					if m[1] == "job" || m[1] == "instance" {
						continue // Prometheus's target labels
					}
					values := []string{m[3]}
					if m[2] == "=~" {
						values = strings.Split(m[3], "|")
					}
					for _, v := range values {
						want := m[1] + `="` + v + `"`
						found := false
						for _, ls := range labelSets {
							if strings.Contains(ls, want) {
								found = true
							}
						}
						if !found {
							t.Errorf("%s: no sample %s{%s} on any board", r.Alert, name, want)
						}
					}
				}
			}
		}
	}
	if checked < 8 {
		t.Errorf("only %d kvmd_* selectors found in the rules: is the parsing broken?", checked)
	}
}
