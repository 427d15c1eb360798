package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"kvmd/internal/testutil"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestInfoGolden")

// TestInfoGolden runs the real binary on every bundled board tree and
// compares its /api/info, in both layouts, with the golden files in
// testdata/golden. Run with -update after a deliberate change and review
// the diff.
func TestInfoGolden(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	meta := filepath.Join(t.TempDir(), "meta.yaml")
	os.WriteFile(meta, []byte("server:\n  host: \"@auto\"\nkvm:\n  name: golden\n"), 0o600)
	for _, board := range []string{"rpi4", "rpi5", "zero2w", "x86"} {
		t.Run(board, func(t *testing.T) {
			root := t.TempDir()
			if err := fixture.UnpackFile(filepath.Join("..", "..", "board", "testdata", board+".ttar"), root); err != nil {
				t.Fatal(err)
			}
			addr := testutil.FreeAddr(t)
			d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr,
				"--root", root, "--meta", meta, "--extras", filepath.Join(root, "no-extras"), "--access-log=false")
			d.stderr.wait(t, `kvmd listening`)
			for _, q := range []string{"", "legacy=0"} {
				got := infoJSON(t, "http://"+addr+"/api/info?"+q)
				name := board
				if q != "" {
					name += "-new"
				}
				golden := filepath.Join("testdata", "golden", name+".json")
				if *update {
					os.MkdirAll(filepath.Dir(golden), 0o755)
					if err := os.WriteFile(golden, got, 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run go test -run TestInfoGolden -update to create it)", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs from %s (-want +got):\n%s", q, golden, lineDiff(string(want), string(got)))
				}
			}
			if out := d.stderr.String(); strings.Contains(out, "level=ERROR") {
				t.Errorf("errors logged:\n%s", out)
			}
		})
	}
}

// infoJSON fetches url and returns it indented, with the build's version
// replaced, so goldens do not change with every commit.
func infoJSON(t *testing.T, url string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth("admin", "pw")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, body)
	}
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	res := v["result"].(map[string]any)
	if sys, ok := res["system"].(map[string]any); ok {
		sys["kvmd"] = map[string]any{"version": "VERSION"}
	}
	out, _ := json.MarshalIndent(v, "", "  ")
	return append(out, '\n')
}

// lineDiff shows the lines that differ, marked - and +.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			b.WriteString("-" + wl + "\n+" + gl + "\n")
		}
	}
	return b.String()
}
