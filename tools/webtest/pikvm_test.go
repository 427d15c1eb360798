package webtest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
	"kvmd/internal/testutil"
)

// PiKVM's nginx configuration, pikvm/kvmd at f14596e8, configs/nginx/. Its
// files are not kept here: the test writes its own configuration in their
// shape, each included file's directives where PiKVM includes it, with
// only what a test must change (paths, a port on loopback, one worker,
// nginx 1.22's spelling of http2, TLS 1.2 and 1.3 only).

// locProxy is loc-proxy.conf's directives: among them Host $host, which
// has no port.
const locProxy = `
		proxy_set_header Host $host;
		proxy_set_header X-Real-IP $remote_addr;
		proxy_set_header X-Scheme $scheme;
		proxy_set_header X-Forwarded-Proto $scheme;
		proxy_set_header X-Forwarded-Port $server_port;
		proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;`

// locWebsocket is loc-websocket.conf's: the upgrade headers, and no
// proxy_http_version, so nginx speaks HTTP/1.0 to the daemon.
const locWebsocket = `
		proxy_set_header Upgrade $http_upgrade;
		proxy_set_header Connection "upgrade";
		proxy_connect_timeout 7d;
		proxy_send_timeout 7d;
		proxy_read_timeout 7d;`

// locNocache, locNobuffering and locLogin are loc-nocache.conf,
// loc-nobuffering.conf and loc-login.conf.
const (
	locNocache = `
		add_header Cache-Control "no-store, no-cache, must-revalidate, proxy-revalidate, pre-check=0, post-check=0, max-age=0";
		expires -1;`
	locNobuffering = `
		postpone_output 0;
		proxy_buffering off;
		proxy_ignore_headers X-Accel-Buffering;`
	locLogin = `
		error_page 401 = @login;
		error_page 403 = @login;`
)

// pikvmServer is one server block as nginx.conf.mako writes it with
// https_enabled (ssl.conf, then kvmd.ctx-server.conf) on port, serving
// web as PiKVM's /usr/share/kvmd/web.
func pikvmServer(port int, web, cert, key string) string {
	return fmt.Sprintf(`
	server {
		listen 127.0.0.1:%[1]d ssl http2;
		# ssl.conf
		ssl_protocols TLSv1.3 TLSv1.2;
		ssl_ciphers "EECDH+AESGCM:EDH+AESGCM:AES256+EECDH:AES256+EDH";
		ssl_certificate %[3]s;
		ssl_certificate_key %[4]s;
		add_header Strict-Transport-Security "max-age=31536000; includeSubDomains" always;

		# kvmd.ctx-server.conf
		absolute_redirect off;
		index index.html;
		auth_request /auth_check;
		location = /auth_check {
			internal;
			proxy_pass http://kvmd/auth/check;
			proxy_pass_request_body off;
			proxy_set_header Content-Length "";
			auth_request off;
		}
		location / {
			root %[2]s;%[5]s%[6]s
		}
		location @login {
			return 302 /login;
		}
		location /login {
			root %[2]s;%[6]s
			auth_request off;
		}
		location /share {
			root %[2]s;%[6]s
			auth_request off;
		}
		location /api/ws {
			rewrite ^/api/ws$ /ws break;
			rewrite ^/api/ws\?(.*)$ /ws?$1 break;
			proxy_pass http://kvmd;%[7]s%[8]s
			auth_request off;
		}
		location /api/log {
			rewrite ^/api/log$ /log break;
			rewrite ^/api/log\?(.*)$ /log?$1 break;
			proxy_pass http://kvmd;%[7]s%[9]s
			proxy_read_timeout 7d;
			auth_request off;
		}
		location /api {
			rewrite ^/api$ / break;
			rewrite ^/api/(.*)$ /$1 break;
			proxy_pass http://kvmd;%[7]s
			auth_request off;
		}
		location /redfish {
			proxy_pass http://kvmd;%[7]s
			auth_request off;
		}
	}
`, port, web, cert, key, locLogin, locNocache, locProxy, locWebsocket, locNobuffering)
}

// startPiKVMNginx runs nginx configured as PiKVM's (nginx.conf.mako's http
// block, kvmd.ctx-http.conf's upstream on the daemon's unix socket sock)
// with the given server blocks, until the test ends.
func startPiKVMNginx(t *testing.T, sock string, servers ...string) {
	t.Helper()
	nginx := testutil.NeedTool(t, "nginx", "nginx")
	dir := t.TempDir()
	user := ""
	if os.Getuid() == 0 {
		// Workers of a master started as root would run as nobody, who
		// may not open the test's files and socket.
		user = "user root;"
	}
	conf := fmt.Sprintf(`%[1]s
worker_processes 1;
daemon off;
pid %[2]s/nginx.pid;
error_log stderr;
events {
	worker_connections 1024;
	use epoll;
	multi_accept on;
}
http {
	types_hash_max_size 4096;
	server_names_hash_bucket_size 128;
	access_log off;
	include /etc/nginx/mime.types;
	default_type application/octet-stream;
	charset utf-8;
	sendfile on;
	tcp_nodelay on;
	tcp_nopush on;
	keepalive_timeout 10;
	client_max_body_size 4k;
	client_body_temp_path %[2]s/client_body_temp;
	fastcgi_temp_path %[2]s/fastcgi_temp;
	proxy_temp_path %[2]s/proxy_temp;
	scgi_temp_path %[2]s/scgi_temp;
	uwsgi_temp_path %[2]s/uwsgi_temp;

	# kvmd.ctx-http.conf
	upstream kvmd {
		server unix:%[3]s fail_timeout=0s max_fails=0;
	}
%[4]s
}
`, user, dir, sock, strings.Join(servers, ""))
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out := &testutil.SyncBuffer{}
	cmd := exec.Command(nginx, "-e", "stderr", "-p", dir, "-c", path)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("nginx:\n%s", out)
		}
	})
	// Until it answers (its pid file is written once it listens).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, "nginx.pid")); err == nil {
			return
		}
		select {
		case <-done:
			t.Fatalf("nginx exited:\n%s", out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not start:\n%s", out)
		}
	}
}

// loginPage is the test's stand-in for PiKVM's login page: what
// web/share/js/login/main.js sends (a form-encoded POST of user, passwd
// and expire to api/auth/login, relative to the page, whose root prefix
// is "../"), then the KVM page.
const loginPage = `<!doctype html><html><head><meta charset="utf-8"><title>Login</title></head><body>
<input id="user-input"><input id="passwd-input" type="password"><button id="login-button">Login</button>
<script>
document.getElementById("login-button").onclick = () => {
	const body = "user=" + encodeURIComponent(document.getElementById("user-input").value) +
		"&passwd=" + encodeURIComponent(document.getElementById("passwd-input").value) + "&expire=0";
	const http = new XMLHttpRequest();
	http.open("POST", "../api/auth/login", true);
	http.setRequestHeader("Content-Type", "application/x-www-form-urlencoded");
	http.onload = () => { if (http.status === 200) { location.href = "../kvm/"; } else { document.title = "login " + http.status; } };
	http.send(body);
};
</script></body></html>`

// kvmPage is the test's stand-in for PiKVM's KVM page: what
// web/share/js/kvm/session.js does. It asks api/auth/check, then opens
// tools.makeWsUrl("api/ws") (web/share/js/tools.js: wss:// on an https
// page, location.host and pathname, and the page's root prefix "../"),
// takes binary messages as array buffers, pings with the byte 0 every
// second and counts a 255 as the pong, and hands each JSON event to the
// subsystem its event_type names; an info event's node sets the title as
// web/share/js/kvm/info.js does. What it receives is kept in window.kvm for
// the test to read.
const kvmPage = `<!doctype html><html><head><meta charset="utf-8"><title>PiKVM Session</title></head><body>
<img id="link-led" class="led-gray"><span id="kvmd-node-host"></span>
<script>
window.kvm = {events: [], atx: [], info: {}, pongs: 0, opened: false, closed: null};
const ROOT_PREFIX = "../";
const check = new XMLHttpRequest();
check.open("GET", ROOT_PREFIX + "api/auth/check", true);
check.onload = () => {
	if (check.status !== 200) { window.kvm.closed = "auth/check " + check.status; return; }
	const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + location.pathname + ROOT_PREFIX + "api/ws");
	ws.binaryType = "arraybuffer";
	ws.onopen = () => {
		window.kvm.opened = true;
		document.getElementById("link-led").className = "led-green";
		setInterval(() => ws.send(new Uint8Array([0])), 1000);
	};
	ws.onmessage = (ev) => {
		if (typeof ev.data === "string") {
			const msg = JSON.parse(ev.data);
			window.kvm.events.push(msg.event_type);
			if (msg.event_type === "atx") { window.kvm.atx.push(msg.event); }
			if (msg.event_type === "info") {
				Object.assign(window.kvm.info, msg.event);
				if (msg.event.node && msg.event.node !== null) {
					document.getElementById("kvmd-node-host").innerText = msg.event.node.host;
					document.title = msg.event.node.host + " | PiKVM Session";
				}
			}
		} else if (new Uint8Array(ev.data)[0] === 255) {
			window.kvm.pongs++;
		}
	};
	ws.onclose = (ev) => { window.kvm.closed = ev.code; document.getElementById("link-led").className = "led-gray"; };
};
check.send();
</script></body></html>`

// foreignPage is a page of another origin (the same host, another port:
// the same site, so the browser sends the SameSite=Strict cookie along)
// that opens the device's event stream.
func foreignPage(target string) string {
	return `<!doctype html><html><head><meta charset="utf-8"></head><body><script>
window.kvm = {events: [], opened: false, closed: null};
const ws = new WebSocket("` + target + `");
ws.onopen = () => { window.kvm.opened = true; };
ws.onmessage = (ev) => { window.kvm.events.push(ev.data); };
ws.onclose = (ev) => { window.kvm.closed = ev.code; };
</script></body></html>`
}

// kvmState is what the KVM page received.
type kvmState struct {
	Events []string                   `json:"events"`
	ATX    []map[string]any           `json:"atx"`
	Info   map[string]json.RawMessage `json:"info"`
	Pongs  int                        `json:"pongs"`
	Opened bool                       `json:"opened"`
	Closed any                        `json:"closed"`
}

func readKVM(t *testing.T, ctx context.Context) kvmState {
	t.Helper()
	var raw string
	act(t, ctx, "reading window.kvm", chromedp.Evaluate(`JSON.stringify(window.kvm || {})`, &raw))
	var st kvmState
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatalf("window.kvm: %v: %s", err, raw)
	}
	return st
}

// waitKVM polls the page's window.kvm until ok says so, for 10 s.
func waitKVM(t *testing.T, ctx context.Context, what string, ok func(kvmState) bool) kvmState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := readKVM(t, ctx)
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s; the page has %+v", what, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPiKVMNginx puts the daemon behind nginx configured as PiKVM's, on
// its unix socket, and opens a page in Chromium that does what PiKVM's
// KVM page does (kvmPage): its /api/ws handshake reaches the daemon as
// nginx sends it (HTTP/1.0, Host without the port, on a port other than
// 443), and the page gets kvmd's greeting (loop, the subsystems' states,
// info), pongs and a later ATX event. A page of another origin on the same
// host is refused. With a mirror of github.com/pikvm/kvmd at hand
// (KVMD_PIKVM_REPO, default /work/.mirror/pikvm+kvmd/repo), PiKVM's own
// login and KVM pages are served from it as well, and must show the link
// as connected and the host name from the info event; CI machines have no
// mirror, and the test says it skipped that part.
func TestPiKVMNginx(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "nginx pass")
	sock := filepath.Join(t.TempDir(), "kvmd.sock")
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--listen", "unix:"+sock)

	dir := t.TempDir()
	web, evil := filepath.Join(dir, "web"), filepath.Join(dir, "evil")
	port, evilPort := freePort(t), freePort(t)
	testutil.WriteFiles(t, web, map[string]string{"login/index.html": loginPage, "kvm/index.html": kvmPage, "index.html": "start"})
	target := fmt.Sprintf("wss://127.0.0.1:%d/api/ws", port)
	testutil.WriteFiles(t, evil, map[string]string{"index.html": foreignPage(target)})
	cert, key := testutil.WriteCertPEM(t, dir, testutil.SelfSigned(t))
	// The foreign page is served by a plain server block of its own.
	evilServer := fmt.Sprintf(`
	server {
		listen 127.0.0.1:%d ssl;
		ssl_certificate %s;
		ssl_certificate_key %s;
		location / { root %s; }
	}
`, evilPort, cert, key, evil)
	startPiKVMNginx(t, sock, pikvmServer(port, web, cert, key), evilServer)
	base := fmt.Sprintf("https://127.0.0.1:%d", port)

	ctx := startBrowser(t, chromedp.Flag("ignore-certificate-errors", true))
	// Without a session, nginx's auth_request sends the browser to the
	// login page.
	act(t, ctx, "opening the KVM page", chromedp.Navigate(base+"/kvm/"), chromedp.WaitVisible("#login-button", chromedp.ByQuery))
	if got := location(t, ctx); got != "/login/" {
		t.Errorf("without a session /kvm/ went to %q, want /login/", got)
	}
	act(t, ctx, "logging in",
		chromedp.SendKeys("#user-input", "admin", chromedp.ByQuery),
		chromedp.SendKeys("#passwd-input", "nginx pass", chromedp.ByQuery),
		chromedp.Click("#login-button", chromedp.ByQuery))

	st := waitKVM(t, ctx, "the greeting", func(st kvmState) bool {
		return st.Closed != nil || slices.Contains(st.Events, "info") && st.Pongs > 0
	})
	if st.Closed != nil || !st.Opened {
		t.Fatalf("the WebSocket closed (%v) or never opened (%v); events %v", st.Closed, st.Opened, st.Events)
	}
	if len(st.Events) == 0 || st.Events[0] != "loop" {
		t.Errorf("events %v, want loop first", st.Events)
	}
	// kvmd's order (kvmd/apps/kvmd/server.py): the subsystems, info among
	// them after the streamer.
	var order []string
	for _, e := range st.Events {
		if slices.Contains([]string{"gpio", "hid", "atx", "msd", "streamer", "info"}, e) && !slices.Contains(order, e) {
			order = append(order, e)
		}
	}
	if want := []string{"gpio", "hid", "atx", "msd", "streamer", "info"}; !slices.Equal(order, want) {
		t.Errorf("first events of each subsystem %v, want %v", order, want)
	}
	host := nodeHost(t, d)
	var title string
	act(t, ctx, "reading the title", chromedp.Title(&title))
	if title != host+" | PiKVM Session" {
		t.Errorf("title %q, want the node's host %q from the info event", title, host)
	}
	for _, field := range []string{"system", "auth", "meta", "extras", "health", "uptime", "node", "fan"} {
		if _, ok := st.Info[field]; !ok {
			t.Errorf("no info event with %s; info has %v", field, keys(st.Info))
		}
	}

	// An ATX click through nginx reaches the page as an atx event.
	before := len(st.ATX)
	var status int
	act(t, ctx, "clicking power through nginx", chromedp.Evaluate(`(() => { const x = new XMLHttpRequest(); x.open("POST", "../api/atx/click?button=power", false); x.send(); return x.status })()`, &status))
	if status != 200 {
		t.Fatalf("POST /api/atx/click through nginx: %d", status)
	}
	waitKVM(t, ctx, "an atx event after the click", func(st kvmState) bool {
		for _, a := range st.ATX[min(before, len(st.ATX)):] {
			if a["busy"] == true {
				return true
			}
		}
		return false
	})

	// Redfish, as PiKVM's nginx sends it: /redfish to the daemon as it is,
	// its own authentication (nginx's auth_request off).
	redfishThroughNginx(t, base)

	// A page of another origin, the same site: the browser sends the
	// cookie, the daemon refuses the handshake.
	act(t, ctx, "the foreign page", chromedp.Navigate(fmt.Sprintf("https://127.0.0.1:%d/", evilPort)))
	st = waitKVM(t, ctx, "the foreign page's socket closing", func(st kvmState) bool { return st.Closed != nil })
	if st.Opened || len(st.Events) > 0 {
		t.Errorf("a page of another origin opened the event stream: %+v", st)
	}

	t.Run("PiKVM's own pages", func(t *testing.T) {
		pikvmPages(t, ctx, sock, host)
	})
}

// pikvmPages serves PiKVM's own web pages from a mirror of its repository
// behind the same nginx configuration, logs in with its login page and
// checks that its KVM page shows the link as connected (its WebSocket
// opened) and the host name from the info event (web/share/js/kvm/info.js:
// #kvmd-node-host and the title).
func pikvmPages(t *testing.T, ctx context.Context, sock, host string) {
	repo := testutil.NeedPiKVMRepo(t)
	dir := t.TempDir()
	web := filepath.Join(dir, "web")
	if err := os.Mkdir(web, 0o755); err != nil {
		t.Fatal(err)
	}
	rev, err := exec.Command("git", "-C", repo, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		t.Fatalf("the mirror: %v", err)
	}
	arch := exec.Command("sh", "-c", `git -C "$0" archive HEAD web | tar -x -C "$1" --strip-components=1`, repo, web)
	if out, err := arch.CombinedOutput(); err != nil {
		t.Fatalf("PiKVM's web files: %v\n%s", err, out)
	}
	cert, key := testutil.WriteCertPEM(t, dir, testutil.SelfSigned(t))
	port := freePort(t)
	startPiKVMNginx(t, sock, pikvmServer(port, web, cert, key))
	base := fmt.Sprintf("https://127.0.0.1:%d", port)

	// Logged out (cookies are not kept apart by port): PiKVM's login page.
	act(t, ctx, "PiKVM's login page", network.ClearBrowserCookies(), chromedp.Navigate(base+"/kvm/"), chromedp.WaitVisible("#login-button", chromedp.ByQuery),
		chromedp.SendKeys("#user-input", "admin", chromedp.ByQuery),
		chromedp.SendKeys("#passwd-input", "nginx pass", chromedp.ByQuery),
		chromedp.Click("#login-button", chromedp.ByQuery))
	for deadline := time.Now().Add(10 * time.Second); location(t, ctx) != "/"; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("PiKVM's login page stayed at %q", location(t, ctx))
		}
	}
	act(t, ctx, "PiKVM's KVM page", chromedp.Navigate(base+"/kvm/"))
	deadline := time.Now().Add(15 * time.Second)
	for {
		var led, node, title string
		chromedp.Run(ctx, chromedp.Evaluate(`document.getElementById("link-led").className`, &led),
			chromedp.Evaluate(`document.getElementById("kvmd-node-host").innerText`, &node), chromedp.Title(&title))
		if led == "led-green" && node == host && title == host+" | PiKVM Session" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("PiKVM's KVM page: link %q, host %q, title %q; want led-green, %q", led, node, title, host)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("PiKVM's KVM page (pikvm/kvmd %s) behind PiKVM's nginx: connected, host %q from the info event", strings.TrimSpace(string(rev)), host)
}

// nodeHost asks the daemon for /api/info's node host directly.
func nodeHost(t *testing.T, d *clienttest.Daemon) string {
	t.Helper()
	req, _ := http.NewRequest("GET", d.URL+"/api/info?fields=node", nil)
	req.Header.Set("X-KVMD-User", "admin")
	req.Header.Set("X-KVMD-Passwd", "nginx pass")
	resp, err := (&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{}}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Result struct {
			Node struct {
				Host string `json:"host"`
			} `json:"node"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Result.Node.Host == "" {
		t.Fatalf("/api/info?fields=node: %v %s", err, b)
	}
	return r.Result.Node.Host
}

func keys[V any](m map[string]V) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	_, p, err := net.SplitHostPort(testutil.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// redfishThroughNginx GETs Redfish resources through PiKVM's nginx: the
// service root without credentials, the system with Basic, and the system
// without credentials, which is Redfish's 401.
func redfishThroughNginx(t *testing.T, base string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer c.CloseIdleConnections()
	for _, tt := range []struct {
		path, user string
		status     int
		want       string
	}{
		{"/redfish/v1/", "", 200, `"Systems":{"@odata.id":"/redfish/v1/Systems"}`},
		{"/redfish/v1/Systems/0", "admin", 200, `"Id":"0","Name":"Host"`},
		{"/redfish/v1/Systems/0", "", 401, `"MessageId":"Base.1.16.NoValidSession"`},
	} {
		req, _ := http.NewRequest("GET", base+tt.path, nil)
		if tt.user != "" {
			req.SetBasicAuth(tt.user, "nginx pass")
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s through nginx: %v", tt.path, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("GET %s through nginx: %d %s, want %d with %s", tt.path, resp.StatusCode, b, tt.status, tt.want)
		}
	}
}
