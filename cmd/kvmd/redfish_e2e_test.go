package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
	"kvmd/msd"
	"kvmd/redfish/redfishtest"
)

// redfishDemo is the demo daemon over TLS with an operator and a viewer,
// and a web server of images on loopback (which msd-remote-deny then
// allows).
type redfishDemo struct {
	d      *proc
	addr   string
	client *http.Client
	images *httptest.Server
	iso    []byte
	cert   string // the daemon's certificate, which sushy verifies
}

func startRedfishDemo(t *testing.T) *redfishDemo {
	t.Helper()
	users := usersFile(t, "op", "oppass")
	if _, stderr, err := runKvmd(t, "viewpass\n", "user", "add", "viewer", "--role", "viewer", "--users", users); err != nil {
		t.Fatalf("user add: %v %s", err, stderr)
	}
	if _, stderr, err := runKvmd(t, "", "user", "set", "op", "--role", "operator", "--users", users); err != nil {
		t.Fatalf("user set: %v %s", err, stderr)
	}
	cert, key := testutil.WriteCertPEM(t, t.TempDir(), testutil.SelfSigned(t))
	e := &redfishDemo{addr: testutil.FreeAddr(t), cert: cert, iso: bytes.Repeat([]byte("kvmd redfish "), msd.MinCDROMSize/13+1)}
	e.images = httptest.NewServer(http.FileServerFS(os.DirFS(imagesDir(t, e.iso))))
	t.Cleanup(e.images.Close)
	e.d = startDaemon(t, nil, nil, "serve", "--demo", "--users", users, "--listen", e.addr,
		"--tls-cert", cert, "--tls-key", key, "--msd-remote-deny", "224.0.0.0/4")
	e.d.stderr.wait(t, `kvmd listening`)
	e.client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	t.Cleanup(e.client.CloseIdleConnections)
	return e
}

// imagesDir makes a directory holding the ISO as installer.iso and as
// ansible.iso: an image downloaded once is in the storage under its name,
// which a second download may not take.
func imagesDir(t *testing.T, iso []byte) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"installer.iso", "ansible.iso"} {
		if err := os.WriteFile(filepath.Join(dir, name), iso, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// api GETs an /api path as the operator into v.
func (e *redfishDemo) api(t *testing.T, path string, v any) {
	t.Helper()
	apiDo(t, e.client, "GET", "https://"+e.addr+path, "op", "oppass", v)
}

// power waits for the ATX board to be idle and returns the power LED.
func (e *redfishDemo) power(t *testing.T) bool {
	t.Helper()
	var st struct {
		Busy bool `json:"busy"`
		Leds struct {
			Power bool `json:"power"`
		} `json:"leds"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		e.api(t, "/api/atx", &st)
		if !st.Busy {
			return st.Leds.Power
		}
		if time.Now().After(deadline) {
			t.Fatal("the ATX board stays busy")
		}
	}
}

// drive returns the MSD drive's image and whether it is connected.
func (e *redfishDemo) drive(t *testing.T) (string, bool) {
	t.Helper()
	var st msd.State
	e.api(t, "/api/msd", &st)
	if st.Drive == nil {
		t.Fatalf("the drive is offline")
	}
	if st.Drive.Image == nil {
		return "", st.Drive.Connected
	}
	return st.Drive.Image.Name, st.Drive.Connected
}

// presses counts the demo host's power button presses in its log.
func (e *redfishDemo) presses(button string) int {
	return strings.Count(e.d.stderr.String(), "demo host: "+button+" button pressed")
}

// TestRedfishClients drives the demo's power and virtual media with the
// Redfish clients people use, as Debian packages them: redfishtool with
// Basic and with a session, sushy (Ironic's client) with a session, and
// Ansible's redfish_command and redfish_info from a playbook. The demo
// host's buttons say in the log when they are pressed, and its power LED
// follows the power button; the drive is the demo's stand-in LUN.
func TestRedfishClients(t *testing.T) {
	e := startRedfishDemo(t)
	op := redfishtest.Target{Addr: e.addr, TLS: true, User: "op", Password: "oppass", CAFile: e.cert}

	t.Run("redfishtool", func(t *testing.T) {
		out, err := redfishtest.Redfishtool(t, op, "-P", "PowerState", "Systems", "-1", "get")
		if err != nil || !strings.Contains(out, `"PowerState": "On"`) {
			t.Fatalf("PowerState: %v\n%s", err, out)
		}
		if out, err := redfishtest.Redfishtool(t, op, "Systems", "-1", "reset", "GracefulShutdown"); err != nil {
			t.Fatalf("reset GracefulShutdown: %v\n%s", err, out)
		}
		if e.power(t) {
			t.Error("the host is still on after GracefulShutdown")
		}
		// With a session: redfishtool logs in, sends X-Auth-Token, and
		// logs out when done.
		if out, err := redfishtest.Redfishtool(t, op, "-A", "Session", "Systems", "-1", "reset", "On"); err != nil {
			t.Fatalf("reset On with a session: %v\n%s", err, out)
		}
		if !e.power(t) {
			t.Error("the host is still off after On")
		}
		var sessions struct {
			Sessions []any `json:"sessions"`
		}
		e.api(t, "/api/auth/sessions", &sessions)
		if len(sessions.Sessions) != 0 {
			t.Errorf("redfishtool's session outlived its logout: %v", sessions.Sessions)
		}
		const insert = "/redfish/v1/Managers/BMC/VirtualMedia/MSD/Actions/VirtualMedia.InsertMedia"
		if out, err := redfishtest.Redfishtool(t, op, "raw", "POST", insert, "-d", `{"Image":"blank-flash.img","WriteProtected":false}`); err != nil {
			t.Fatalf("InsertMedia: %v\n%s", err, out)
		}
		if img, on := e.drive(t); img != "blank-flash.img" || !on {
			t.Errorf("drive after InsertMedia: %q connected=%v", img, on)
		}
		if out, err := redfishtest.Redfishtool(t, op, "raw", "POST", strings.Replace(insert, "InsertMedia", "EjectMedia", 2), "-d", `{}`); err != nil {
			t.Fatalf("EjectMedia: %v\n%s", err, out)
		}
		if img, on := e.drive(t); img != "" || on {
			t.Errorf("drive after EjectMedia: %q connected=%v", img, on)
		}
		// A viewer reads, and may not press.
		viewer := op
		viewer.User, viewer.Password = "viewer", "viewpass"
		if out, err := redfishtest.Redfishtool(t, viewer, "Systems", "-1", "reset", "On"); err == nil || !strings.Contains(out, "403") {
			t.Errorf("a viewer's reset: %v\n%s", err, out)
		}
		bad := op
		bad.Password = "wrong"
		if out, err := redfishtest.Redfishtool(t, bad, "Systems"); err == nil || !strings.Contains(out, "401") {
			t.Errorf("a wrong password: %v\n%s", err, out)
		}
	})

	t.Run("sushy", func(t *testing.T) {
		before, was := e.presses("power"), e.power(t)
		url := e.images.URL + "/installer.iso"
		out, err := redfishtest.Sushy(t, op, `
import os, sushy
s = sushy.Sushy(os.environ['KVMD_BASE'] + '/redfish/v1', username=os.environ['KVMD_USER'],
                password=os.environ['KVMD_PASSWORD'], verify=os.environ['KVMD_VERIFY'] or False)
print('auth', 'session' if s._auth.get_session_key() else 'basic')
system = s.get_system()
print('power', system.power_state.value)
system.reset_system(sushy.RESET_PUSH_POWER_BUTTON)
vm = system.managers[0].virtual_media.get_members()[0]
vm.insert_media('`+url+`', inserted=True, write_protected=True)
vm.refresh()
print('inserted', vm.inserted, vm.image, vm.image_name, vm.write_protected)
vm.eject_media()
vm.refresh()
print('ejected', vm.inserted, vm.image)
s._auth.close()
`)
		if err != nil {
			t.Fatalf("sushy: %v\n%s", err, out)
		}
		for _, want := range []string{"auth session", "power " + map[bool]string{true: "On", false: "Off"}[was], "inserted True " + url + " installer.iso True", "ejected False None"} {
			if !strings.Contains(out, want) {
				t.Errorf("sushy printed no %q:\n%s", want, out)
			}
		}
		if e.power(t) == was || e.presses("power") != before+1 {
			t.Errorf("PushPowerButton: %d presses after %d, power LED on %v", e.presses("power"), before, e.power(t))
		}
		if got := e.read(t, "installer.iso"); !bytes.Equal(got, e.iso) {
			t.Errorf("the downloaded image differs from the server's (%d bytes, %d)", len(got), len(e.iso))
		}
	})

	t.Run("ansible", func(t *testing.T) {
		url := e.images.URL + "/ansible.iso"
		before, was := e.presses("power"), e.power(t)
		results, log, err := redfishtest.Playbook(t, op, fmt.Sprintf(`
- community.general.redfish_info: {baseuri: "{{ baseuri }}", username: "{{ username }}", password: "{{ password }}", category: Systems, command: GetSystemInventory}
- community.general.redfish_command: {baseuri: "{{ baseuri }}", username: "{{ username }}", password: "{{ password }}", category: Systems, command: PowerOn}
- community.general.redfish_command:
    baseuri: "{{ baseuri }}"
    username: "{{ username }}"
    password: "{{ password }}"
    category: Manager
    command: VirtualMediaInsert
    timeout: 60
    virtual_media: {image_url: %q, media_types: [CD, DVD]}
- community.general.redfish_info: {baseuri: "{{ baseuri }}", username: "{{ username }}", password: "{{ password }}", category: Manager, command: GetVirtualMedia}
- community.general.redfish_command:
    baseuri: "{{ baseuri }}"
    username: "{{ username }}"
    password: "{{ password }}"
    category: Manager
    command: VirtualMediaEject
    virtual_media: {image_url: %q}
- community.general.redfish_command: {baseuri: "{{ baseuri }}", username: "{{ username }}", password: "{{ password }}", category: Sessions, command: CreateSession}
  register: session
- community.general.redfish_command: {baseuri: "{{ baseuri }}", auth_token: "{{ session.session.token }}", category: Systems, command: PowerGracefulShutdown}
- community.general.redfish_command: {baseuri: "{{ baseuri }}", auth_token: "{{ session.session.token }}", category: Sessions, command: DeleteSession, session_uri: "{{ session.session.uri }}"}
`, url, url))
		if err != nil || len(results) != 8 {
			t.Fatalf("ansible-playbook: %v, %d results\n%s", err, len(results), log)
		}
		js, _ := json.Marshal(results)
		for _, want := range []string{`"PowerState":"` + map[bool]string{true: "On", false: "Off"}[was] + `"`, `"Image":"` + url + `"`, `"ImageName":"ansible.iso"`} {
			if !strings.Contains(string(js), want) {
				t.Errorf("no %s in the play's results:\n%s", want, js)
			}
		}
		// PowerOn pressed power when the host was off, and the shutdown
		// through the session pressed it once more.
		for i, changed := range []bool{false, !was, true, false, true, true, true, true} {
			if results[i]["changed"] != changed || results[i]["failed"] == true {
				t.Errorf("task %d: %v", i, results[i])
			}
		}
		want := before + 1
		if !was {
			want++
		}
		if e.power(t) || e.presses("power") != want {
			t.Errorf("PowerGracefulShutdown: %d presses after %d", e.presses("power"), before)
		}
		if img, on := e.drive(t); img != "" || on {
			t.Errorf("drive after the eject: %q connected=%v", img, on)
		}
	})
}

// read returns an image's bytes from GET /api/msd/read.
func (e *redfishDemo) read(t *testing.T, name string) []byte {
	t.Helper()
	req, _ := http.NewRequest("GET", "https://"+e.addr+"/api/msd/read?image="+name, nil)
	req.SetBasicAuth("op", "oppass")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return b
}
