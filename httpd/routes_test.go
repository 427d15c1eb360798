package httpd

import (
	"bytes"
	"cmp"
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
	rt := &route{method, path, api, role, c, 0, always, func(_ *Server, w http.ResponseWriter, r *http.Request) error { return h(w, r) }}
	if err := s.routes.add(rt); err != nil {
		panic(err)
	}
}

// allFeatures is every feature that can be on at once: metrics are either
// open or not.
const allFeatures = fTokens | fUsers | fInfo | fMetricsAuth | fDevices | fDiagnostics | fHID

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

// sortedTable is the route table sorted by path, method, where it is
// served and condition, so that reordering the literal changes nothing
// generated from it.
func sortedTable() []route {
	rows := slices.Clone(routeTable)
	slices.SortStableFunc(rows, func(a, b route) int {
		return cmp.Or(strings.Compare(a.path, b.path), strings.Compare(a.method, b.method), int(a.at)-int(b.at),
			int(a.when.f)-int(b.when.f), strings.Compare(a.when.sub, b.when.sub))
	})
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

// bodyName is a row's body column as the golden file and the docs say it.
func bodyName(rt route) string {
	switch {
	case rt.at == ws || rt.at == page || rt.at == below:
		return "-"
	case rt.body == rawBody:
		return "streamed"
	case rt.body == 0:
		return "4 KiB"
	case rt.body%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", rt.body>>20)
	}
	return fmt.Sprintf("%d KiB", rt.body>>10)
}

func goldenRoutes() string {
	var b strings.Builder
	b.WriteString(`# The route table of httpd/routes.go: method, path, where it is served
# ("/api /": at /api/PATH and PATH; "/api": at /api/PATH only; "/": at
# PATH only; "page": a web page at PATH, "page/*": every page below PATH,
# whose refusals send a browser to the login page; "ws": a kind of
# message a /api/ws client sends), least role, whether an API token and a
# unix-socket peer may call it, the largest body ("4 KiB": Config.MaxBody;
# "streamed": the handler's), and the Config field it exists under. A
# change here changes who may do what: rewrite with go test ./httpd -run
# TestRouteTableGolden -update, and review the diff.
`)
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "METHOD\tPATH\tAT\tROLE\tTOKEN\tPEER\tBODY\tWHEN")
	for _, rt := range sortedTable() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", rt.method, rt.path, rt.at, roleName(rt.role),
			yesNo(rt, viaToken), yesNo(rt, viaPeer), bodyName(rt), rt.when)
	}
	tw.Flush()
	return b.String()
}

// TestRouteTableDuplicates: the route table has one row per method and
// served path under every Config; New refuses a duplicate, and a row it
// cannot serve, instead of letting the later one win.
func TestRouteTableDuplicates(t *testing.T) {
	bits := []feature{fTokens, fUsers, fInfo, fMetricsAuth, fMetricsOpen, fDevices, fDiagnostics, fHID, fUI}
	for n := range 1 << len(bits) {
		var have feature
		for i, b := range bits {
			if n&(1<<i) != 0 {
				have |= b
			}
		}
		if have&fMetricsAuth != 0 && have&fMetricsOpen != 0 {
			continue // Config.features never turns on both
		}
		s := &Server{routes: newRouteSet()}
		if err := s.addRoutes(routeTable, have, nil); err != nil {
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
		if got := c.features(); got&fMetricsAuth != 0 && got&fMetricsOpen != 0 {
			t.Errorf("Config.features turns on both metrics rows: %#x", uint16(got))
		}
	}

	h := func(*Server, http.ResponseWriter, *http.Request) error { return nil }
	dup := []route{
		{"POST", "/atx/click", api, auth.RoleOperator, anyCred, 0, always, h},
		{"POST", "/atx/click", api, auth.RoleViewer, anyCred, 0, withDevices, h},
	}
	s := &Server{routes: newRouteSet()}
	if err := s.addRoutes(dup, 0, nil); err != nil {
		t.Errorf("a row whose feature is off: %v", err)
	}
	s = &Server{routes: newRouteSet()}
	if err := s.addRoutes(dup, fDevices, nil); !errors.Is(err, ErrDuplicateRoute) {
		t.Errorf("a duplicate: %v, want ErrDuplicateRoute", err)
	}
	// A row at PATH only and one at /api/PATH only do not collide; one
	// at both collides with either.
	apart := []route{{"GET", "/x", bare, auth.RoleViewer, anyCred, 0, always, h}, {"GET", "/x", apiOnly, auth.RoleViewer, anyCred, 0, always, h}}
	s = &Server{routes: newRouteSet()}
	if err := s.addRoutes(apart, 0, nil); err != nil {
		t.Errorf("rows at /x and /api/x: %v", err)
	}
	if err := s.routes.add(&route{"GET", "/x", api, auth.RoleViewer, anyCred, 0, always, h}); !errors.Is(err, ErrDuplicateRoute) {
		t.Errorf("a row at both beside them: %v, want ErrDuplicateRoute", err)
	}
	for _, bad := range []route{
		{"HEAD", "/x", api, auth.RoleViewer, anyCred, 0, always, h},
		{"get", "/x", api, auth.RoleViewer, anyCred, 0, always, h},
		{"GET", "x", api, auth.RoleViewer, anyCred, 0, always, h},
		{"GET", "/api/x", api, auth.RoleViewer, anyCred, 0, always, h},
		{"GET", "/x", api, auth.RoleAdmin + 1, anyCred, 0, always, h},
		{"GET", "/x", api, auth.RoleNone, viaToken, 0, always, h},
		{"GET", "/x", api, auth.RoleViewer, anyCred, 0, always, nil},
		{"GET", "/x", api, auth.RoleViewer, anyCred, -2, always, h},
		{"GET", "/x", ws + 1, auth.RoleViewer, anyCred, 0, always, h},
		{"GET", "/x", below, auth.RoleViewer, anyCred, 0, always, h},
		{"GET", "key", ws, auth.RoleViewer, anyCred, 0, always, h},
		{"WS", "/ws/key", ws, auth.RoleViewer, anyCred, 0, always, h},
	} {
		s := &Server{routes: newRouteSet()}
		if err := s.addRoutes([]route{bad}, 0, nil); !errors.Is(err, errBadRoute) {
			t.Errorf("%s %s at %s role %d creds %d: %v, want errBadRoute", bad.method, bad.path, bad.at, bad.role, bad.creds, err)
		}
	}
	// A GET row answers HEAD; a HEAD of its own is a duplicate of it.
	s = &Server{routes: newRouteSet()}
	if err := s.addRoutes([]route{{"GET", "/x", api, auth.RoleViewer, anyCred, 0, always, h}}, 0, nil); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/x", "/api/x"} {
		if p := s.routes.paths[path]; p == nil || p.methods["HEAD"] == nil || p.allow != "GET, HEAD" {
			t.Errorf("GET row at %s: %+v", path, p)
		}
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

// docName is how the docs name a row.
func docName(rt route) string {
	switch rt.at {
	case api, apiOnly:
		return "`" + rt.method + " /api" + rt.path + "`"
	case ws:
		return "`" + rt.path + "` messages on `/api/ws`"
	case below:
		return "`" + rt.method + " " + rt.path + "*`"
	}
	return "`" + rt.method + " " + rt.path + "`"
}

// docRoleTable is the short table: the endpoints each role is the least
// role of, and which refuse tokens and peers.
func docRoleTable() string {
	byRole := map[auth.Role][]string{}
	var noToken, noPeer []string
	for _, rt := range sortedTable() {
		name := docName(rt)
		if rt.when == withMetricsAuth || rt.when == withMetricsOpen {
			name += " (" + featureServe(rt.when) + ")"
		}
		byRole[rt.role] = append(byRole[rt.role], name)
		if rt.role != auth.RoleNone && rt.creds&viaToken == 0 {
			noToken = append(noToken, docName(rt))
		}
		if rt.role != auth.RoleNone && rt.creds&viaPeer == 0 {
			noPeer = append(noPeer, docName(rt))
		}
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

func featureServe(w when) string {
	if w.sub != "" {
		return "with the subsystem " + w.sub
	}
	for _, n := range features {
		if n.f == w.f {
			return n.serve
		}
	}
	return w.String()
}

// docPath is a row's path cell in the full table.
func docPath(rt route) string {
	switch rt.at {
	case api:
		return "`/api" + rt.path + "` (and `" + rt.path + "`)"
	case apiOnly:
		return "`/api" + rt.path + "`"
	case bare:
		return "`" + rt.path + "` (no `/api`)"
	case page:
		return "`" + rt.path + "` (a page)"
	case below:
		return "`" + rt.path + "*` (pages)"
	}
	return "`" + rt.path + "` message on `/api/ws`"
}

// docRouteTable is the full table: every row.
func docRouteTable() string {
	var b strings.Builder
	b.WriteString("| method | path | least role | API token | unix-socket peer | body | served |\n|---|---|---|---|---|---|---|\n")
	for _, rt := range sortedTable() {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | %s |\n", rt.method, docPath(rt), roleName(rt.role),
			yesNo(rt, viaToken), yesNo(rt, viaPeer), bodyName(rt), featureServe(rt.when))
	}
	return b.String()
}
