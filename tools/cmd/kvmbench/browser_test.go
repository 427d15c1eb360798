//go:build !arm && !arm64

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"kvmd/internal/testutil"
)

// TestLoadPage loads the bare page in the real Chromium, as the web UI
// rows do, and a path that redirects, which has to fail.
func TestLoadPage(t *testing.T) {
	path := testutil.NeedTool(t, "chromium", "chromium")
	mux := http.NewServeMux()
	mux.Handle("/", baselineHandler(map[string][]byte{"/api/info": []byte(`{"ok":true,"result":{"hw":{"platform":"test"}}}`)}))
	mux.Handle("/moved", http.RedirectHandler(basePagePath, http.StatusFound))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	l, err := newPageLoader(context.Background(), path, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !strings.Contains(l.product, "Chrome/") {
		t.Errorf("browser product %q", l.product)
	}
	for range 2 {
		s, err := l.load(srv.URL+basePagePath, basePagePath)
		if err != nil {
			t.Fatalf("loading the bare page: %v", err)
		}
		// Every file and the /api/info the script fetched: the cache is off.
		if s.Ready <= 0 || s.Load <= 0 || s.Requests != 4 || s.Bytes < 19<<10 {
			t.Errorf("sample %+v, want both times, 4 requests, all files' bytes", s)
		}
	}
	var text string
	if err := chromedp.Run(l.tab, chromedp.Text("#info", &text, chromedp.ByQuery)); err != nil || !strings.Contains(text, "platform") {
		t.Errorf("the page did not render /api/info: %q %v", text, err)
	}
	if _, err := l.load(srv.URL+"/moved", "/moved"); err == nil || !strings.Contains(err.Error(), `ended at "/page"`) {
		t.Errorf("a redirected load: %v, want it to fail", err)
	}
}
