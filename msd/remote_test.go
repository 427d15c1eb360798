package msd_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"kvmd/msd"
)

// imageServer serves the test's images over plain HTTP or TLS, counting
// the connections open on its side: a download must leave none.
type imageServer struct {
	*httptest.Server
	img  []byte
	open atomic.Int64
	// hang is closed to let a stalled handler go.
	hang chan struct{}
}

func newImageServer(t *testing.T, tls bool) *imageServer {
	t.Helper()
	s := &imageServer{img: make([]byte, 3<<20+17), hang: make(chan struct{})}
	rand.Read(s.img)
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.open.Add(-1)
		}
	}
	if tls {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(func() {
		select {
		case <-s.hang:
		default:
			close(s.hang)
		}
		s.Close()
	})
	return s
}

func (s *imageServer) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch r.URL.Path {
	case "/image.iso":
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(s.img))
	case "/short.img":
		// A wrong length: it announces more than it sends, then ends
		// the connection.
		w.Header().Set("Content-Length", strconv.Itoa(len(s.img)))
		w.Write(s.img[:len(s.img)/2])
	case "/cut.img":
		// The connection is cut in the middle of the body.
		w.Header().Set("Content-Length", strconv.Itoa(len(s.img)))
		w.WriteHeader(200)
		w.Write(s.img[:1<<20])
		w.(http.Flusher).Flush()
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close()
	case "/stall.img":
		w.Header().Set("Content-Length", strconv.Itoa(len(s.img)))
		w.WriteHeader(200)
		w.Write(s.img[:1000])
		w.(http.Flusher).Flush()
		select {
		case <-s.hang:
		case <-r.Context().Done():
		}
	case "/chunked.img":
		w.(http.Flusher).Flush() // no length
		w.Write(s.img[:100])
	case "/gzip.img":
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Content-Length", "100")
		w.Write(s.img[:100])
	case "/redirect":
		// ?to=URL, or ?n=N: N redirects more to /image.iso.
		to := q.Get("to")
		if n, _ := strconv.Atoi(q.Get("n")); n > 0 {
			to = fmt.Sprintf("/redirect?n=%d", n-1)
		} else if to == "" {
			to = "/image.iso"
		}
		http.Redirect(w, r, to, http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

// fetchAll downloads url into a new storage as an upload would be, and
// returns what the storage holds after, and the error.
func fetchAll(t *testing.T, ctx context.Context, url string, o msd.FetchOptions) (string, []string, error) {
	t.Helper()
	m, _, dir := newManager(t, nil)
	name := ""
	rem, err := msd.Fetch(ctx, url, o)
	if err == nil {
		name = rem.Name
		err = m.Download(ctx, rem, rem.Name, func(int64) {})
		rem.Body.Close()
	}
	ents, _ := os.ReadDir(dir)
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	if st := m.State(); st.Busy || st.Storage.Uploading != nil {
		t.Errorf("%s: the storage is still busy after the download", url)
	}
	return filepath.Join(dir, name), files, err
}

// TestFetch downloads from local web servers, over HTTP and HTTPS: whole
// images, and every way one can go wrong. Each failure leaves nothing in
// the storage; no goroutine and no connection (counted on the server's
// side) is left after any of them.
func TestFetch(t *testing.T) {
	plain := newImageServer(t, false)
	tlsSrv := newImageServer(t, true)
	before := runtime.NumGoroutine()
	o := msd.FetchOptions{Timeout: 5 * time.Second, Stall: 300 * time.Millisecond, Insecure: true}

	for _, tt := range []struct {
		name, url string
		opts      *msd.FetchOptions
		want      error  // nil: the image arrives whole
		msg       string // in the error
	}{
		{name: "http", url: plain.URL + "/image.iso"},
		{name: "https", url: tlsSrv.URL + "/image.iso"},
		{name: "redirect", url: plain.URL + "/redirect"},
		{name: "five redirects", url: plain.URL + "/redirect?n=4"},
		{name: "http to https", url: plain.URL + "/redirect?to=" + tlsSrv.URL + "/image.iso"},
		{name: "https untrusted", url: tlsSrv.URL + "/image.iso", opts: &msd.FetchOptions{Timeout: 5 * time.Second}, want: msd.ErrRemote, msg: "could not be reached"},
		{name: "six redirects", url: plain.URL + "/redirect?n=5", want: msd.ErrRemote, msg: "more than 5 times"},
		{name: "https to http", url: tlsSrv.URL + "/redirect?to=" + plain.URL + "/image.iso", want: msd.ErrRemote, msg: "from https to http"},
		{name: "redirect to file", url: plain.URL + "/redirect?to=file:///etc/passwd", want: msd.ErrRemote, msg: "redirected"},
		{name: "redirect to ftp", url: plain.URL + "/redirect?to=ftp://" + strings.TrimPrefix(plain.URL, "http://") + "/x.iso", want: msd.ErrRemote, msg: "redirected"},
		{name: "not found", url: plain.URL + "/missing.iso", want: msd.ErrRemote, msg: "404"},
		{name: "no length", url: plain.URL + "/chunked.img", want: msd.ErrRemote, msg: "Content-Length"},
		{name: "encoded", url: plain.URL + "/gzip.img", want: msd.ErrRemote, msg: "Content-Encoding gzip"},
		{name: "wrong length", url: plain.URL + "/short.img", want: io.ErrUnexpectedEOF},
		{name: "cut", url: plain.URL + "/cut.img", want: io.ErrUnexpectedEOF},
		{name: "cut over TLS", url: tlsSrv.URL + "/cut.img", want: io.ErrUnexpectedEOF},
		{name: "stalled", url: plain.URL + "/stall.img", want: msd.ErrStalled},
		{name: "loopback denied", url: plain.URL + "/image.iso", opts: &msd.FetchOptions{Timeout: 5 * time.Second, Deny: msd.DefaultDeny}, want: msd.ErrRemote, msg: "does not download from"},
		{name: "localhost denied", url: strings.Replace(plain.URL, "127.0.0.1", "localhost", 1) + "/image.iso", opts: &msd.FetchOptions{Timeout: 5 * time.Second, Deny: msd.DefaultDeny}, want: msd.ErrRemote, msg: "does not download from"},
		{name: "ftp", url: "ftp://example.org/x.iso", want: msd.ErrRemote, msg: "Not an http"},
		{name: "no host", url: "http:///x.iso", want: msd.ErrRemote, msg: "Not an http"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := o
			if tt.opts != nil {
				opts = *tt.opts
			}
			path, files, err := fetchAll(t, context.Background(), tt.url, opts)
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := os.ReadFile(path); !bytes.Equal(got, plain.img) && !bytes.Equal(got, tlsSrv.img) {
					t.Error("the image stored differs from the server's")
				}
				if len(files) != 1 || files[0] != "image.iso" {
					t.Errorf("storage holds %q", files)
				}
				return
			}
			if !errors.Is(err, tt.want) || !strings.Contains(errMsg(err), tt.msg) {
				t.Errorf("error %v (%q), want %v saying %q", err, errMsg(err), tt.want, tt.msg)
			}
			if len(files) != 0 {
				t.Errorf("storage holds %q after a failed download", files)
			}
		})
	}
	close(plain.hang)
	waitFor(t, "the servers' connections to close", func() bool { return plain.open.Load() == 0 && tlsSrv.open.Load() == 0 })
	waitFor(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}

// TestFetchCancel: the client going away (its context ending) stops a
// download in the middle, and nothing is kept.
func TestFetchCancel(t *testing.T) {
	srv := newImageServer(t, false)
	m, _, dir := newManager(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	rem, err := msd.Fetch(ctx, srv.URL+"/stall.img", msd.FetchOptions{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rem.Body.Close()
	var once sync.Once
	err = m.Download(ctx, rem, "cancelled.img", func(n int64) {
		if n > 0 {
			once.Do(cancel)
		}
	})
	var cut *msd.CutError
	if !errors.As(err, &cut) || !errors.Is(err, context.Canceled) || cut.Written != 1000 {
		t.Errorf("%v", err)
	}
	assertFiles(t, dir)
}

// TestFetchName: the image's name from the server's Content-Disposition,
// else the final URL's last element (after redirects), else none.
func TestFetchName(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/dl":
			w.Header().Set("Content-Disposition", r.URL.Query().Get("cd"))
		case "/go":
			http.Redirect(w, r, "/final/after.img", http.StatusMovedPermanently)
			return
		}
		w.Write([]byte("x"))
	}))
	defer srv.Close()
	for _, tt := range []struct{ path, want string }{
		{"/dl?cd=" + url.QueryEscape(`attachment; filename="a.iso"`), "a.iso"},
		{"/dl?cd=" + url.QueryEscape(`attachment; filename="..\..\etc\b.img"`), "b.img"},
		{"/dl?cd=" + url.QueryEscape(`attachment; filename=".hidden"`), "dl"},
		{"/go", "after.img"},
		{"/plain/name.img", "name.img"},
		{"/", ""},
	} {
		rem, err := msd.Fetch(context.Background(), srv.URL+tt.path, msd.FetchOptions{Timeout: time.Second})
		got := ""
		if err == nil {
			got = rem.Name
			rem.Body.Close()
		}
		if got != tt.want || (tt.want == "" && !errors.Is(err, msd.ErrRemote)) {
			t.Errorf("%s: name %q (%v), want %q", tt.path, got, err, tt.want)
		}
	}
}

// TestDenyChecksEveryAddress: the deny list holds on the address
// connected to, not the URL's text: a name resolving into a denied network
// is refused, a redirect into one too.
func TestDenyChecksEveryAddress(t *testing.T) {
	srv := newImageServer(t, false)
	deny := []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}
	o := msd.FetchOptions{Timeout: 5 * time.Second, Deny: deny}
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	// 127.0.0.1 is allowed here; the redirect goes to 127.0.0.2, which
	// the kernel also routes to loopback, and is denied.
	_, files, err := fetchAll(t, context.Background(), fmt.Sprintf("%s/redirect?to=http://127.0.0.2:%d/image.iso", srv.URL, port), o)
	if !errors.Is(err, msd.ErrRemote) || !strings.Contains(errMsg(err), "does not download from") || len(files) != 0 {
		t.Errorf("redirect into a denied network: %v, storage %q", err, files)
	}
}

func errMsg(err error) string {
	var e *msd.Error
	if errors.As(err, &e) {
		return e.Msg
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("waiting for %s\n%s", what, buf[:runtime.Stack(buf, true)])
		}
	}
}
