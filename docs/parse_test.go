package docs

import (
	"reflect"
	"testing"
)

// TestParsePage checks what the link checker takes for a link and for a
// heading's anchor, on small pages.
func TestParsePage(t *testing.T) {
	for _, tc := range []struct {
		name    string
		text    string
		links   []link
		anchors []string
	}{
		{"inline and image", "a [b](docs/c.md) and\n![d](docs/e.png \"t\")\n", []link{{1, "docs/c.md"}, {2, "docs/e.png"}}, nil},
		{"outside", "The contract is [`API.md`](../shared/API.md).", []link{{1, "../shared/API.md"}}, nil},
		{"reference", "[x]: ../y.md\n", []link{{1, "../y.md"}}, nil},
		{"html", `<img src="docs/a.png"> <a href="https://x.org">x</a>`, []link{{1, "docs/a.png"}, {1, "https://x.org"}}, nil},
		{"bare URL", "see https://example.org/x for more\nor www.example.org", []link{{1, "https://example.org/x"}, {2, "www.example.org"}}, nil},
		{"fenced code", "```sh\ncurl [a](../b) https://x\n```\n  ~~~\n[c](d)\n  ~~~\n", nil, nil},
		{"code span", "run `curl https://x/[a](../b)` now", nil, nil},
		{"code span over lines", "with `curl -u a:b\nhttps://DEVICE/api/log`, then [e](f.md)", []link{{2, "f.md"}}, nil},
		{"comment", "<!-- [a](../b)\nhttps://x -->[c](d.md)", []link{{2, "d.md"}}, nil},
		{"headings", "# kvmd\n## Behind a reverse proxy\n## Metrics: `GET /api/export/prometheus/metrics`\n## Roles\n### Roles\n## 2FA, users & tokens ##\n",
			nil, []string{"kvmd", "behind-a-reverse-proxy", "metrics-get-apiexportprometheusmetrics", "roles", "roles-1", "2fa-users--tokens"}},
		{"heading with link", "## See [the API](api.md)\n", []link{{1, "api.md"}}, []string{"see-the-api"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := parsePage(tc.text)
			if !reflect.DeepEqual(p.links, tc.links) {
				t.Errorf("links %v, want %v", p.links, tc.links)
			}
			want := map[string]bool{}
			for _, a := range tc.anchors {
				want[a] = true
			}
			if !reflect.DeepEqual(p.anchors, want) {
				t.Errorf("anchors %v, want %v", p.anchors, want)
			}
		})
	}
}

// TestResolve checks which links count as inside the repository.
func TestResolve(t *testing.T) {
	for _, tc := range []struct {
		from, target, path, frag string
		ok                       bool
	}{
		{"README.md", "docs/api.md", "docs/api.md", "", true},
		{"README.md", "docs/api.md#errors", "docs/api.md", "errors", true},
		{"docs/api.md", "../README.md#install", "README.md", "install", true},
		{"docs/api.md", "#errors", "docs/api.md", "errors", true},
		{"docs/api.md", "security.md", "docs/security.md", "", true},
		{"docs/api.md", "../../shared/API.md", "", "", false},
		{"README.md", "../shared/API.md", "", "", false},
		{"README.md", "docs/../../x.md", "", "", false},
		{"README.md", "/work/shared/API.md", "", "", false},
		{"README.md", "https://github.com/pikvm/kvmd", "", "", false},
		{"README.md", "file:///etc/passwd", "", "", false},
		{"README.md", "www.example.org", "", "", false},
		{"README.md", "", "", "", false},
	} {
		path, frag, err := resolve(tc.from, tc.target)
		if (err == nil) != tc.ok || path != tc.path || frag != tc.frag {
			t.Errorf("resolve(%q, %q) = %q, %q, %v; want %q, %q, ok %v", tc.from, tc.target, path, frag, err, tc.path, tc.frag, tc.ok)
		}
	}
}
