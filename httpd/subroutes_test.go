package httpd

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"

	"kvmd/auth"
	"kvmd/subsystem"
)

// echo is a subsystem with a route of its own: POST /echo/say answers its
// body.
type echo struct{ handlers map[string]subsystem.Handler }

func (echo) Name() string                              { return "echo" }
func (echo) State(context.Context) string              { return "" }
func (echo) Watch(ctx context.Context, _ func(string)) { <-ctx.Done() }
func (e echo) Handlers() map[string]subsystem.Handler  { return e.handlers }
func newEcho() echo {
	return echo{map[string]subsystem.Handler{"POST /echo/say": func(w http.ResponseWriter, r *http.Request) error {
		b, _ := io.ReadAll(r.Body)
		return WriteJSON(w, map[string]string{"said": string(b)})
	}}}
}

var echoRow = route{"POST", "/echo/say", api, auth.RoleOperator, anyCred, 0, sub("echo"), nil}

// TestSubsystemRoutes: a subsystem's own route is served with the policy
// of its row of the table (the role, at /api and without), its handler
// the subsystem's; New refuses a handler without a row, and a row whose
// subsystem gives no handler or whose handler is not nil; a row of a
// subsystem the Devices do not have is not served.
func TestSubsystemRoutes(t *testing.T) {
	e := newEnv(t, envOpts{devices: &Devices{}})
	subs := []subsystem.Subsystem{subsystem.Of[string](newEcho())}
	if err := e.srv.addRoutes([]route{echoRow}, fDevices, subs); err != nil {
		t.Fatal(err)
	}
	if r := e.req("POST", "/api/echo/say", viewerAuth, "hi"); r.status != 403 || r.errName != "ForbiddenError" {
		t.Errorf("a viewer: %d %s, want 403: the row's role", r.status, r.errName)
	}
	for _, p := range []string{"/api/echo/say", "/echo/say"} {
		if r := e.req("POST", p, operatorAuth, "hi"); r.status != 200 || string(r.body) != `{"ok":true,"result":{"said":"hi"}}` {
			t.Errorf("an operator at %s: %d %s", p, r.status, r.body)
		}
	}

	if _, err := New(Config{Auth: e.a, Devices: &Devices{Subsystems: subs}}); !errors.Is(err, errBadRoute) {
		t.Errorf("New with a subsystem handler no row names: %v, want errBadRoute", err)
	}
	h := func(*Server, http.ResponseWriter, *http.Request) error { return nil }
	for name, rows := range map[string][]route{
		"no handler given":     {{"POST", "/echo/other", api, auth.RoleOperator, anyCred, 0, sub("echo"), nil}, echoRow},
		"a handler of its own": {{"POST", "/echo/say", api, auth.RoleOperator, anyCred, 0, sub("echo"), h}},
	} {
		if _, err := bindSubsystems(rows, fDevices, subs); !errors.Is(err, errBadRoute) {
			t.Errorf("%s: %v, want errBadRoute", name, err)
		}
	}
	rows, err := bindSubsystems([]route{echoRow}, fDevices, nil)
	if err != nil || len(rows) != 0 {
		t.Errorf("a row of a subsystem not there: %d rows, %v; want none", len(rows), err)
	}
}
