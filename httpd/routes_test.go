package httpd

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"

	"kvmd/auth"
)

var update = flag.Bool("update", false, "rewrite testdata/routes.golden and the route tables of README.md and docs/*.md")

// handle adds a test's own route to s, open to every credential.
func (s *Server) handle(method, path string, role auth.Role, h HandlerFunc) {
	c := anyCred
	if role == auth.RoleNone {
		c = 0
	}
	rt := &route{method, path, role, c, always, func(_ *Server, w http.ResponseWriter, r *http.Request) error { return h(w, r) }}
	if err := s.add(rt); err != nil {
		panic(err)
	}
}

// allFeatures is every feature that can be on at once: metrics are either
// open or not.
const allFeatures = withTokens | withUsers | withInfo | withMetricsAuth | withDevices | withDiagnostics | withHID | withRedfish

// TestRouteTableGolden pins who may call what: the role, token and peer
// permission and the condition of every row of the route table. Lowering a
// route's role (POST /atx/click to viewer), letting a token write users,
// or adding a route fails here until testdata/routes.golden is rewritten
// (-update) and the diff reviewed.
func TestRouteTableGolden(t *testing.T) {
	got := goldenRoutes()
	path := filepath.Join("testdata", "routes.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(want) != got {
		t.Errorf("the route table differs from %s (-golden +table); if the change is meant, rerun with -update and review:\n%s", path, lineDiff(string(want), got))
	}
}

// sortedTable is the route table sorted by path, method and feature, so
// that reordering the literal changes nothing generated from it.
func sortedTable() []route {
	rows := slices.Clone(routeTable)
	slices.SortStableFunc(rows, func(a, b route) int {
		if c := compareRoutes(a.info(), b.info()); c != 0 {
			return c
		}
		return int(a.when) - int(b.when)
	})
	return rows
}

// sortedRaw is rawRouteTable sorted as sortedTable sorts.
func sortedRaw() []route {
	rows := slices.Clone(rawRouteTable)
	slices.SortStableFunc(rows, func(a, b route) int { return compareRoutes(a.info(), b.info()) })
	return rows
}

func yesNo(rt route, c creds) string {
	switch {
	case rt.role == auth.RoleNone:
		return "-"
	case rt.creds&c != 0:
		return "yes"
	}
	return "no"
}

func roleName(r auth.Role) string {
	if r == auth.RoleNone {
		return "public"
	}
	return r.String()
}

func goldenRoutes() string {
	var b strings.Builder
	b.WriteString(`# The route table of httpd/routes.go: method, path (served with and without
# /api), least role, whether an API token and a unix-socket peer may call it,
# and the Config field it exists under. A change here changes who may do
# what: rewrite with go test ./httpd -run TestRouteTableGolden -update,
# and review the diff.
`)
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tPATH\tROLE\tTOKEN\tPEER\tWHEN")
	for _, rt := range sortedTable() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", rt.method, rt.path, roleName(rt.role),
			yesNo(rt, viaToken), yesNo(rt, viaPeer), rt.when)
	}
	tw.Flush()
	b.WriteString("# rawRouteTable: outside /api, at these paths only.\n")
	tw = tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, rt := range sortedRaw() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", rt.method, rt.path, roleName(rt.role),
			yesNo(rt, viaToken), yesNo(rt, viaPeer), rt.when)
	}
	tw.Flush()
	return b.String()
}

// TestRouteTableDuplicates: the route table has one row per method and
// path under every Config; New refuses a duplicate, and a row it cannot
// serve, instead of letting the later one win.
func TestRouteTableDuplicates(t *testing.T) {
	bits := []feature{withTokens, withUsers, withInfo, withMetricsAuth, withMetricsOpen, withDevices, withDiagnostics}
	for n := range 1 << len(bits) {
		var have feature
		for i, b := range bits {
			if n&(1<<i) != 0 {
				have |= b
			}
		}
		if have&withMetricsAuth != 0 && have&withMetricsOpen != 0 {
			continue // Config.features never turns on both
		}
		s := &Server{routes: map[string]*pathRoutes{}}
		if err := s.addRoutes(routeTable, have); err != nil {
			t.Errorf("features %#x: %v", uint16(have), err)
		}
	}
	for _, f := range []func(*Config){
		func(c *Config) { c.Metrics = nil },
		func(c *Config) { c.Metrics = nopMetrics{} },
		func(c *Config) { c.Metrics, c.MetricsOpen = nopMetrics{}, true },
	} {
		var c Config
		f(&c)
		if got := c.features(); got&withMetricsAuth != 0 && got&withMetricsOpen != 0 {
			t.Errorf("Config.features turns on both metrics rows: %#x", uint16(got))
		}
	}

	h := func(*Server, http.ResponseWriter, *http.Request) error { return nil }
	dup := []route{
		{"POST", "/atx/click", auth.RoleOperator, anyCred, always, h},
		{"POST", "/atx/click", auth.RoleViewer, anyCred, withDevices, h},
	}
	s := &Server{routes: map[string]*pathRoutes{}}
	if err := s.addRoutes(dup, 0); err != nil {
		t.Errorf("a row whose feature is off: %v", err)
	}
	s = &Server{routes: map[string]*pathRoutes{}}
	if err := s.addRoutes(dup, withDevices); !errors.Is(err, ErrDuplicateRoute) {
		t.Errorf("a duplicate: %v, want ErrDuplicateRoute", err)
	}
	for _, bad := range []route{
		{"HEAD", "/x", auth.RoleViewer, anyCred, always, h},
		{"get", "/x", auth.RoleViewer, anyCred, always, h},
		{"GET", "x", auth.RoleViewer, anyCred, always, h},
		{"GET", "/api/x", auth.RoleViewer, anyCred, always, h},
		{"GET", "/x", auth.RoleAdmin + 1, anyCred, always, h},
		{"GET", "/x", auth.RoleNone, viaToken, always, h},
		{"GET", "/x", auth.RoleViewer, anyCred, always, nil},
	} {
		s := &Server{routes: map[string]*pathRoutes{}}
		if err := s.addRoutes([]route{bad}, 0); !errors.Is(err, errBadRoute) {
			t.Errorf("%s %s role %d creds %d: %v, want errBadRoute", bad.method, bad.path, bad.role, bad.creds, err)
		}
	}
	// A GET row answers HEAD; a HEAD of its own is a duplicate of it.
	s = &Server{routes: map[string]*pathRoutes{}}
	if err := s.addRoutes([]route{{"GET", "/x", auth.RoleViewer, anyCred, always, h}}, 0); err != nil {
		t.Fatal(err)
	}
	if s.routes["/x"].methods["HEAD"] == nil || s.routes["/x"].allow != "GET, HEAD" {
		t.Errorf("GET row: methods %v allow %q", s.routes["/x"].methods, s.routes["/x"].allow)
	}
}

type nopMetrics struct{}

func (nopMetrics) WriteMetrics(io.Writer) error { return nil }

// lineDiff marks the lines of want missing from got (-) and those of got
// missing from want (+).
func lineDiff(want, got string) string {
	in := func(s, line string) bool { return strings.Contains("\n"+s, "\n"+line+"\n") }
	var b strings.Builder
	for l := range strings.Lines(want) {
		if !in(got, strings.TrimSuffix(l, "\n")) {
			b.WriteString("-" + l)
		}
	}
	for l := range strings.Lines(got) {
		if !in(want, strings.TrimSuffix(l, "\n")) {
			b.WriteString("+" + l)
		}
	}
	return b.String()
}

// TestDocsRouteTables: the role tables of the docs are generated from the
// route table, between their markers, wherever they are (README.md or a
// page of docs/): each marker once.
func TestDocsRouteTables(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	for _, block := range []struct{ name, text string }{
		{"route-roles", docRoleTable()},
		{"route-table", docRouteTable()},
	} {
		begin := "<!-- " + block.name + ": generated from httpd/routes.go by go test ./httpd -run TestDocsRouteTables -update -->\n"
		end := "<!-- /" + block.name + " -->\n"
		found := 0
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			n := bytes.Count(data, []byte(begin))
			if n == 0 {
				continue
			}
			found += n
			i := bytes.Index(data, []byte(begin)) + len(begin)
			j := bytes.Index(data[i:], []byte(end))
			if n > 1 || j < 0 {
				t.Errorf("%s: %d %s blocks, or no end marker", f, n, block.name)
				continue
			}
			got := string(data[i : i+j])
			if *update && got != block.text {
				out := slices.Concat(data[:i], []byte(block.text), data[i+j:])
				if err := os.WriteFile(f, out, 0o644); err != nil {
					t.Fatal(err)
				}
				got = block.text
			}
			if got != block.text {
				t.Errorf("%s: the %s block is not the route table's (-docs +table); rerun with -update:\n%s", f, block.name, lineDiff(got, block.text))
			}
		}
		if found != 1 {
			t.Errorf("the %s block is in %d files, want 1; it starts with the line\n%s", block.name, found, begin)
		}
	}
}

// docRoleTable is the short table: the endpoints each role is the least
// role of, and which refuse tokens and peers.
func docRoleTable() string {
	byRole := map[auth.Role][]string{}
	var noToken, noPeer []string
	for _, rt := range sortedTable() {
		name := "`" + rt.method + " /api" + rt.path + "`"
		if rt.when == withMetricsAuth || rt.when == withMetricsOpen {
			name += " (" + featureServe(rt.when) + ")"
		}
		byRole[rt.role] = append(byRole[rt.role], name)
		if rt.role != auth.RoleNone && rt.creds&viaToken == 0 {
			noToken = append(noToken, "`"+rt.method+" /api"+rt.path+"`")
		}
		if rt.role != auth.RoleNone && rt.creds&viaPeer == 0 {
			noPeer = append(noPeer, "`"+rt.method+" /api"+rt.path+"`")
		}
	}
	for _, rt := range sortedRaw() {
		byRole[rt.role] = append(byRole[rt.role], "`"+rt.method+" "+rt.path+"`")
	}
	var b strings.Builder
	b.WriteString("| least role | endpoints |\n|---|---|\n")
	for _, r := range []auth.Role{auth.RoleNone, auth.RoleViewer, auth.RoleOperator, auth.RoleAdmin} {
		fmt.Fprintf(&b, "| %s | %s |\n", roleName(r), strings.Join(byRole[r], ", "))
	}
	fmt.Fprintf(&b, "\nAn API token, whatever its role, gets `403 ForbiddenError` from %s. A unix-socket peer's credentials do not count for %s.\n",
		strings.Join(noToken, ", "), strings.Join(noPeer, ", "))
	return b.String()
}

func featureServe(f feature) string {
	for _, n := range features {
		if n.f == f {
			return n.serve
		}
	}
	return f.String()
}

// docRouteTable is the full table: every row.
func docRouteTable() string {
	var b strings.Builder
	b.WriteString("| method | path | least role | API token | unix-socket peer | served |\n|---|---|---|---|---|---|\n")
	for _, rt := range sortedTable() {
		fmt.Fprintf(&b, "| `%s` | `/api%s` | %s | %s | %s | %s |\n", rt.method, rt.path, roleName(rt.role),
			yesNo(rt, viaToken), yesNo(rt, viaPeer), featureServe(rt.when))
	}
	for _, rt := range sortedRaw() {
		fmt.Fprintf(&b, "| `%s` | `%s` (no `/api`) | %s | %s | %s | %s |\n", rt.method, rt.path, roleName(rt.role),
			yesNo(rt, viaToken), yesNo(rt, viaPeer), featureServe(rt.when))
	}
	return b.String()
}
