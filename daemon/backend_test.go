package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// authDoc is the manual's page on external authentication, whose YAML
// examples TestAuthConfigExamples checks.
const authDoc = "../docs/external-auth.md"

// yamlBlocks returns the fenced yaml code blocks of a Markdown text.
func yamlBlocks(text string) []string {
	var blocks []string
	var cur []string
	in := false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && trimmed == "```yaml":
			in, cur = true, nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, ""))
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// secretFileKey finds the keys of secret files in an example, whose paths
// are made to point at a file of the test's.
var secretFileKey = regexp.MustCompile(`(?m)^((?:radius|http-auth)-secret-file):.*$`)

// TestAuthConfigExamples checks the configuration examples of
// docs/external-auth.md: each parses as a config file, and its backend is
// built (none connects at construction).
func TestAuthConfigExamples(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	os.WriteFile(secret, []byte("s3cret\n"), 0o600)
	doc, err := os.ReadFile(authDoc)
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]int{}
	for i, yml := range yamlBlocks(string(doc)) {
		if !strings.Contains(yml, "auth-backend:") {
			continue
		}
		yml = secretFileKey.ReplaceAllString(yml, "$1: "+secret)
		path := filepath.Join(dir, fmt.Sprintf("example%d.yaml", i))
		os.WriteFile(path, []byte("users: /etc/kvmd/htpasswd\n"+yml), 0o600)
		cfg := DefaultConfig()
		err := cfg.Load(path)
		if err == nil {
			err = cfg.Check()
		}
		if err != nil {
			t.Errorf("example %d: %v\n%s", i, err, yml)
			continue
		}
		b, err := newBackend(cfg)
		if err != nil || b == nil || b.Name() != cfg.AuthBackend {
			t.Errorf("example %d: backend %v, %v, want %s", i, b, err, cfg.AuthBackend)
			continue
		}
		backends[b.Name()]++
	}
	// LDAP (OpenLDAP and Active Directory), RADIUS, HTTP.
	if want := map[string]int{"ldap": 2, "radius": 1, "http": 1}; !reflect.DeepEqual(backends, want) {
		t.Errorf("%s: examples by backend %v, want %v", authDoc, backends, want)
	}
}
