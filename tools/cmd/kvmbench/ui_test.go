package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWriteUI(t *testing.T) {
	ms := func(xs ...float64) []time.Duration {
		ds := make([]time.Duration, len(xs))
		for i, x := range xs {
			ds[i] = msDuration(x)
		}
		return ds
	}
	row := func(p uiPage, load, ready []time.Duration, requests, bytes int64) *uiRow {
		return &uiRow{uiPage: p, load: load, ready: ready, requests: requests, bytes: bytes}
	}
	measured := &uiResult{loads: 3, browser: "HeadlessChrome/1.0", journal: "the demo journal",
		rows: []*uiRow{
			row(uiPages[0], ms(30, 40, 35), ms(45, 50, 48), 4, 19479),
			row(uiPages[1], ms(60, 70.04, 65), ms(58, 66, 62), 5, 15667),
			row(uiPages[2], ms(99.9, 120, 101), ms(130, 110, 100), 6, 22528),
			row(uiPages[3], ms(40, 45, 45.4), ms(50, 50, 50), 6, 22528),
		}}
	tests := []struct {
		name string
		res  *uiResult
		want string
	}{
		{"measured", measured,
			"| page | load | load vs baseline | ready | ready vs baseline | requests, body bytes | target | result |\n" +
				"|---|---:|---:|---:|---:|---:|---|---|\n" +
				"| baseline | 35.0 ms (40.0 ms) | 1.00x | 48.0 ms (50.0 ms) | 1.00x | 4, 19.0 KiB | reference | — |\n" +
				"| /login | 65.0 ms (70.0 ms) | 1.86x | 62.0 ms (66.0 ms) | 1.29x | 5, 15.3 KiB | load < 100 ms, ≤ 1.30x | MISS |\n" +
				"| / | 101 ms (120 ms) | 2.89x | 110 ms (130 ms) | 2.29x | 6, 22.0 KiB | load < 100 ms, ≤ 1.30x | MISS |\n" +
				"| /logs | 45.0 ms (45.4 ms) | 1.29x | 50.0 ms (50.0 ms) | 1.04x | 6, 22.0 KiB | load < 100 ms, ≤ 1.30x | pass |\n" +
				"\nMedians of 3 loads each, p90 in brackets. Browser: HeadlessChrome/1.0. The logs page read the demo journal.\n"},
		{"skipped", &uiResult{skip: "chromium is not installed"}, "Not measured: chromium is not installed.\n"},
		{"failed before any load", &uiResult{rows: []*uiRow{row(uiPages[0], nil, nil, 0, 0)}, err: errors.New("starting chromium: boom")},
			"- FAIL starting chromium: boom\n"},
		{"failed partway", &uiResult{loads: 3, browser: "B", journal: "J", rows: measured.rows[:2], err: errors.New("/logs, load 5: the page ended at \"/login\", want \"/logs\"")},
			"| page | load | load vs baseline | ready | ready vs baseline | requests, body bytes | target | result |\n" +
				"|---|---:|---:|---:|---:|---:|---|---|\n" +
				"| baseline | 35.0 ms (40.0 ms) | 1.00x | 48.0 ms (50.0 ms) | 1.00x | 4, 19.0 KiB | reference | — |\n" +
				"| /login | 65.0 ms (70.0 ms) | 1.86x | 62.0 ms (66.0 ms) | 1.29x | 5, 15.3 KiB | load < 100 ms, ≤ 1.30x | MISS |\n" +
				"\nMedians of 3 loads each, p90 in brackets. Browser: B. The logs page read J.\n" +
				"\n- FAIL /logs, load 5: the page ended at \"/login\", want \"/logs\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			writeUI(&b, tt.res)
			if got := b.String(); got != tt.want {
				t.Errorf("writeUI (-want +got):\n-%s\n+%s", tt.want, got)
			}
		})
	}
	// The report's list of misses names the same pages as the table.
	if got, want := measured.misses(), []string{"/login page load", "/ page load"}; !slices.Equal(got, want) {
		t.Errorf("misses = %q, want %q", got, want)
	}
	for _, res := range []*uiResult{nil, {skip: "chromium is not installed"}, {rows: []*uiRow{row(uiPages[0], nil, nil, 0, 0)}}} {
		if got := res.misses(); got != nil {
			t.Errorf("misses of %+v = %q, want none", res, got)
		}
	}
	if err := measured.failure(); err != nil {
		t.Errorf("failure of a measured run = %v, want nil", err)
	}
	if err := (*uiResult)(nil).failure(); err != nil {
		t.Errorf("failure without web UI rows = %v, want nil", err)
	}
	if err := (&uiResult{err: errors.New("boom")}).failure(); err == nil || err.Error() != "web UI: boom" {
		t.Errorf("failure = %v, want web UI: boom", err)
	}
}

func TestUISample(t *testing.T) {
	tests := []struct {
		s       uiSample
		wantErr string
		load    time.Duration
	}{
		{uiSample{Path: "/logs", Load: 56.30000000074506, Ready: 89.3}, "", 56300 * time.Microsecond},
		{uiSample{Path: "/login", Load: 12, Ready: 15}, `the page ended at "/login", want "/logs"`, 12 * time.Millisecond},
		{uiSample{Path: "/logs", Ready: 15}, "no times (load 0 ms, ready 15 ms)", 0},
	}
	for _, tt := range tests {
		err := tt.s.check("/logs")
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr) {
			t.Errorf("check(%+v) = %v, want %q", tt.s, err, tt.wantErr)
		}
		if got := msDuration(tt.s.Load); got != tt.load {
			t.Errorf("msDuration(%v) = %v, want %v", tt.s.Load, got, tt.load)
		}
	}
}

// TestBasePage checks the bare page's files have the sizes the report
// gives and are what the page asks for.
func TestBasePage(t *testing.T) {
	srv := httptest.NewServer(baselineHandler(nil))
	defer srv.Close()
	for path, want := range map[string]struct {
		size  int
		ctype string
	}{
		basePagePath: {2 << 10, "text/html; charset=utf-8"},
		"/page.css":  {5 << 10, "text/css; charset=utf-8"},
		"/page.js":   {12 << 10, "text/javascript; charset=utf-8"},
	} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ContentLength != int64(want.size) || resp.Header.Get("Content-Type") != want.ctype {
			t.Errorf("GET %s: %d, %d bytes, %q; want 200, %d bytes, %q", path, resp.StatusCode, resp.ContentLength,
				resp.Header.Get("Content-Type"), want.size, want.ctype)
		}
	}
	html := string(basePageFiles[basePagePath].body)
	for _, w := range []string{`href="/page.css"`, `src="/page.js"`, "-->\n</main>\n</body>\n</html>\n"} {
		if !strings.Contains(html, w) {
			t.Errorf("the page lacks %q:\n%s", w, html)
		}
	}
	if got := padded("0123456789", "/* ", " */", "", 5); string(got) != "0123456789/*  */" {
		t.Errorf("padded past its size = %q", got)
	}
}
