package httpd

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"kvmd/auth"
)

// TestShutdownEndsRequestContexts: when the server begins to shut down,
// every request's context ends (http.Server.BaseContext), so a handler
// that waits on it returns at once instead of holding the shutdown until
// its timeout cuts the connection.
func TestShutdownEndsRequestContexts(t *testing.T) {
	var e *env
	t.Cleanup(func() { // after the env's own cleanup, which waits for Serve
		if strings.Contains(e.logs.String(), "requests still running at shutdown were cut") {
			t.Errorf("the shutdown waited for its timeout:\n%s", e.logs)
		}
	})
	entered, returned := make(chan struct{}), make(chan error, 1)
	e = newEnv(t, envOpts{extraRoutes: func(s *Server) {
		s.handle("GET", "/wait", auth.RoleViewer, func(w http.ResponseWriter, r *http.Request) error {
			close(entered)
			<-r.Context().Done()
			returned <- r.Context().Err()
			return r.Context().Err()
		})
	}})
	go e.req("GET", "/api/wait", xhdr("admin", "admin-pass"), "")
	<-entered
	e.shutdown()
	select {
	case err := <-returned:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the request's context ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler still waits 5 s after the shutdown began")
	}
	if strings.Contains(e.logs.String(), "request failed") {
		t.Errorf("a request cut by the shutdown was logged as a failure:\n%s", e.logs)
	}
}
