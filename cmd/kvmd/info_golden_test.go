package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/internal/testutil"

	"kvmd/internal/fixture"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestInfoGolden")

// TestInfoGolden runs the real binary on every board tree in
// board/testdata and compares its /api/info, in both layouts, with the
// golden files in testdata/golden. After a deliberate change, regenerate
// them all with
//
//	go test ./cmd/kvmd -run TestInfoGolden -update
//
// and review the diff.
func TestInfoGolden(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	meta := filepath.Join(t.TempDir(), "meta.yaml")
	os.WriteFile(meta, []byte("server:\n  host: \"@auto\"\nkvm:\n  name: golden\n"), 0o600)
	archives, err := filepath.Glob(filepath.Join("..", "..", "board", "testdata", "*.ttar"))
	if err != nil || len(archives) == 0 {
		t.Fatalf("no board trees: %v", err)
	}
	boards := map[string]bool{}
	for _, archive := range archives {
		board := strings.TrimSuffix(filepath.Base(archive), ".ttar")
		boards[board] = true
		t.Run(board, func(t *testing.T) {
			root := t.TempDir()
			if err := fixture.UnpackFile(archive, root); err != nil {
				t.Fatal(err)
			}
			addr := testutil.FreeAddr(t)
			// No streamer program: system.streamer would be this
			// machine's ustreamer, which no board tree holds.
			d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr,
				"--root", root, "--meta", meta, "--extras", filepath.Join(root, "no-extras"), "--access-log=false",
				"--streamer", "/nonexistent/ustreamer")
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
					t.Fatalf("%v (run go test ./cmd/kvmd -run TestInfoGolden -update to create it)", err)
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
	// A golden file without its tree tests nothing.
	goldens, _ := filepath.Glob(filepath.Join("testdata", "golden", "*.json"))
	for _, g := range goldens {
		if board := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(g), ".json"), "-new"); !boards[board] {
			if *update {
				os.Remove(g)
				continue
			}
			t.Errorf("%s has no board tree in board/testdata (remove it, or run with -update)", g)
		}
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
