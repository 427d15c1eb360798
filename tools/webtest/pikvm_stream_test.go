package webtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
	"kvmd/internal/testutil"
	"kvmd/tools/internal/screen"
)

// TestPiKVMPage serves PiKVM's own KVM page (its web/ files, from a mirror
// of its repository) from nginx in front of the demo daemon, as PiKVM's
// layout has it and as the manual's proxy page shows: /kvm/ and /share/
// from files, everything else to the daemon over TLS. Chromium logs in
// through the API; the page's Direct H.264 (/api/media/ws, decoded by
// WebCodecs into its canvas), then its MJPEG stream (its
// /streamer/stream?key=, found again by the stream_client cookie in the
// streamer state's clients_stat), show the demo's colour bars.
func TestPiKVMPage(t *testing.T) {
	repo := testutil.NeedPiKVMRepo(t)
	nginx := testutil.NeedTool(t, "nginx", "/usr/sbin/nginx")
	dir := t.TempDir()
	web := filepath.Join(dir, "web")
	if err := os.Mkdir(web, 0o755); err != nil {
		t.Fatal(err)
	}
	arch := exec.Command("sh", "-c", `git -C "$0" archive HEAD web | tar -x -C "$1" --strip-components=1`, repo, web)
	if out, err := arch.CombinedOutput(); err != nil {
		t.Fatalf("PiKVM's web files: %v\n%s", err, out)
	}
	// The daemon over TLS: its session cookie is Secure there, so the
	// page is https too.
	certFile, keyFile := testutil.WriteCertPEM(t, dir, testutil.SelfSigned(t))
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--tls-cert", certFile, "--tls-key", keyFile)
	daemon := strings.TrimPrefix(strings.TrimPrefix(d.URL, "https://"), "http://")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := fmt.Sprintf(`daemon off;
%[6]s
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events {}
http {
	include /etc/nginx/mime.types;
	access_log %[1]s/access.log;
	client_body_temp_path %[1]s; proxy_temp_path %[1]s; fastcgi_temp_path %[1]s; uwsgi_temp_path %[1]s; scgi_temp_path %[1]s;
	map $http_upgrade $connection_upgrade { default upgrade; "" close; }
	server {
		listen 127.0.0.1:%[2]d ssl;
		ssl_certificate %[4]s;
		ssl_certificate_key %[5]s;
		location /kvm/ { alias %[3]s/kvm/; }
		location /share/ { alias %[3]s/share/; }
		location / {
			proxy_pass https://%[7]s;
			proxy_ssl_verify off;
			proxy_set_header Host $http_host;
			proxy_set_header X-Real-IP $remote_addr;
			proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
			proxy_set_header X-Forwarded-Proto $scheme;
			proxy_set_header Forwarded "";
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $connection_upgrade;
			proxy_http_version 1.1;
			proxy_buffering off;
			proxy_read_timeout 1h;
		}
	}
}
`, dir, port, web, certFile, keyFile, rootUser(), daemon)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	ng := exec.Command(nginx, "-c", filepath.Join(dir, "nginx.conf"), "-p", dir)
	var ngOut bytes.Buffer
	ng.Stdout, ng.Stderr = &ngOut, &ngOut
	if err := ng.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ng.Process.Signal(os.Interrupt)
		ng.Wait()
	})
	base := fmt.Sprintf("https://127.0.0.1:%d", port)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := insecure.Get(base + "/kvm/")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx does not serve PiKVM's page: %v %s\n%s", err, ngOut.String(), log)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The test's own certificate, which Chromium does not know.
	ctx := startBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	// Logged in as PiKVM's login page does, from a page of the proxy.
	var status float64
	act(t, ctx, "login", chromedp.Navigate(base+"/share/css/main.css"),
		chromedp.Evaluate(`fetch('/api/auth/login', {method: 'POST', credentials: 'same-origin',
			headers: {'Content-Type': 'application/x-www-form-urlencoded'},
			body: 'user=admin&passwd=' + encodeURIComponent('web pass')}).then(r => r.status)`, &status, awaitPromise))
	if status != 200 {
		t.Fatalf("login: HTTP %v", status)
	}
	// The daemon has H.264, so the page plays PiKVM's Direct H.264
	// (/api/media/ws into its canvas: its default Janus has no server
	// here, and it falls to "media", as on a PiKVM without Janus); asked
	// for MJPEG (its mode switch, kept in localStorage) it shows
	// /streamer/stream in its image.
	act(t, ctx, "PiKVM's KVM page", chromedp.Navigate(base+"/kvm/"))
	pikvmShows(t, ctx, "stream-canvas", `(() => { const c = document.getElementById('stream-canvas');
		return !!c && !c.classList.contains('hidden') && c.width === 1920 && c.offsetWidth > 0; })()`)
	waitText(t, ctx, "#stream-window-header .window-grab", "Direct H.264 - 1920x1080")

	act(t, ctx, "MJPEG mode", chromedp.Evaluate(`localStorage.setItem('stream.mode', 'mjpeg')`, nil), chromedp.Reload())
	pikvmShows(t, ctx, "stream-image", `(() => { const i = document.getElementById('stream-image');
		return !!i && i.naturalWidth === 1920 && !i.src.includes('blank-stream'); })()`)
	// The page found its own client in the streamer state's clients_stat
	// (by the stream_client cookie), as it does on a PiKVM: its title.
	waitText(t, ctx, "#stream-window-header .window-grab", "HTTP MJPEG - 1920x1080")
}

// pikvmShows waits until ready (a JavaScript expression) says PiKVM's
// page shows its picture in the element id, then checks it is the demo's
// colour bars.
func pikvmShows(t *testing.T, ctx context.Context, id, ready string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var ok bool
		chromedp.Run(ctx, chromedp.Evaluate(ready, &ok))
		if ok {
			break
		}
		if time.Now().After(deadline) {
			var src string
			chromedp.Run(ctx, chromedp.Evaluate(`(document.getElementById('stream-image')||{}).src||''`, &src))
			t.Fatalf("PiKVM's page shows no stream in #%s (the image's src %q, the title %q)", id, src,
				text(t, ctx, "#stream-window-header .window-grab"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	var err error
	for range 10 { // a frame more or two: the first may be partial, or a decoder's grey
		time.Sleep(300 * time.Millisecond)
		var rect [4]float64
		act(t, ctx, "the picture's rectangle", chromedp.Evaluate(`(() => {
			const r = document.getElementById('`+id+`').getBoundingClientRect(); return [r.left, r.top, r.width, r.height]; })()`, &rect))
		var png []byte
		act(t, ctx, "screenshot", chromedp.CaptureScreenshot(&png))
		if _, err = screen.CheckBars(png, rect, 0.3); err == nil {
			return
		}
	}
	t.Errorf("PiKVM's page, #%s: %v", id, err)
}

func awaitPromise(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }

// rootUser is nginx's user directive when the test runs as root: the
// workers must read the test's own directories.
func rootUser() string {
	if os.Geteuid() == 0 {
		return "user root root;"
	}
	return ""
}
