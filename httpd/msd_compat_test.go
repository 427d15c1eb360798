package httpd

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"kvmd/msd"
)

// The virtual media requests of kvmd's third-party clients, as their
// source sends them, and what they do with the answers.

// haProcessMSD is ha-pikvm-control's _process_msd_event
// (github.com/metril/ha-pikvm-control, 2cfbdc0,
// custom_components/pikvm/coordinator.py), which merges /api/msd's result
// and every msd event into its state: event.get("drive", {}) and
// event.get("storage", {}) are tested with "in", which raises TypeError on
// None; storage["images"].keys() needs an object.
func haProcessMSD(state map[string]any, event map[string]any) error {
	drive, ok := event["drive"]
	if !ok {
		drive = map[string]any{}
	}
	d, ok := drive.(map[string]any)
	if !ok {
		return fmt.Errorf(`TypeError: "connected" in drive: drive is %v`, drive)
	}
	for _, k := range []string{"connected", "image", "cdrom", "rw"} {
		if v, ok := d[k]; ok {
			state[k] = v
		}
	}
	if v, ok := event["enabled"]; ok {
		state["enabled"] = v
	}
	storage, ok := event["storage"]
	if !ok {
		storage = map[string]any{}
	}
	s, ok := storage.(map[string]any)
	if !ok {
		return fmt.Errorf(`TypeError: "images" in storage: storage is %v`, storage)
	}
	if imgs, ok := s["images"]; ok {
		m, ok := imgs.(map[string]any)
		if !ok {
			return fmt.Errorf("AttributeError: storage.images.keys(): images is %v", imgs)
		}
		var names []string
		for n := range m {
			names = append(names, n)
		}
		slices.Sort(names)
		state["images"] = names
	}
	return nil
}

// haRequest is ha-pikvm-control's PikvmApiClient._request (api.py): Basic
// credentials with the TOTP code appended to the password (none here),
// and any answer but 200 with ok true is an error.
func haRequest(t *testing.T, e *msdEnv, method, path string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(method, e.base+path, nil)
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("operator:operator-pass")))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var data map[string]any
	if resp.StatusCode != 200 || json.Unmarshal(b, &data) != nil || data["ok"] != true {
		t.Fatalf("%s %s: PikvmApiError: HTTP %d: %s", method, path, resp.StatusCode, b)
	}
	return data
}

// TestHAPikvmControlMSD: ha-pikvm-control sets up (its first refresh reads
// /api/msd; with today's "storage": null beside a drive it raised
// TypeError and the integration failed), follows msd events on
// /api/ws?stream=0, and its MSD Image select and MSD Connected switch
// work (select.py, switch.py, api.py: set_msd_connected,
// set_msd_params).
func TestHAPikvmControlMSD(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, map[string]string{
		"debian.iso": strings.Repeat("\x00", msd.MinCDROMSize), "tools.img": strings.Repeat("t", 4096),
	})
	state := map[string]any{}
	// coordinator._async_update_data: get_msd_state, then the merge.
	res := haRequest(t, e, "GET", "/api/msd")["result"].(map[string]any)
	if err := haProcessMSD(state, res); err != nil {
		t.Fatalf("first refresh: %v", err)
	}
	if !slices.Equal(state["images"].([]string), []string{"debian.iso", "tools.img"}) || state["connected"] != false {
		t.Errorf("state after the first refresh: %v", state)
	}

	// The WebSocket, with its X-KVMD headers (api.py connect_ws).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, strings.Replace(e.base, "http", "ws", 1)+"/api/ws?stream=0",
		&websocket.DialOptions{HTTPHeader: http.Header{"X-Kvmd-User": {"operator"}, "X-Kvmd-Passwd": {"operator-pass"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	events := make(chan map[string]any, 100)
	go func() {
		for {
			_, b, err := ws.Read(context.Background())
			if err != nil {
				close(events)
				return
			}
			var m map[string]any
			json.Unmarshal(b, &m)
			if m["event_type"] == "msd" {
				events <- m["event"].(map[string]any)
			}
		}
	}()
	follow := func(what string, done func() bool) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for !done() {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("the WebSocket closed")
				}
				if err := haProcessMSD(state, ev); err != nil {
					t.Fatalf("msd event: %v", err)
				}
			case <-deadline:
				t.Fatalf("%s: state %v", what, state)
			}
		}
	}
	follow("the initial msd event", func() bool { return state["images"] != nil })

	// PikvmMsdImageSelect.async_select_option("debian.iso"), not
	// connected: set_params with the current cdrom (default True) and rw.
	haRequest(t, e, "POST", "/api/msd/set_params?image=debian.iso&cdrom=1&rw=0")
	// PikvmMsdSwitch.async_turn_on.
	haRequest(t, e, "POST", "/api/msd/set_connected?connected=1")
	follow("connected", func() bool { return state["connected"] == true })
	if img, _ := state["image"].(map[string]any); img["name"] != "debian.iso" || state["cdrom"] != true {
		t.Errorf("state after connecting: %v", state)
	}
	// Selecting another image while connected: disconnect, set, reconnect.
	haRequest(t, e, "POST", "/api/msd/set_connected?connected=0")
	haRequest(t, e, "POST", "/api/msd/set_params?image=tools.img&cdrom=0&rw=0")
	haRequest(t, e, "POST", "/api/msd/set_connected?connected=1")
	follow("tools.img connected", func() bool {
		img, _ := state["image"].(map[string]any)
		return state["connected"] == true && img["name"] == "tools.img"
	})
	// An upload elsewhere shows in the events it merges.
	e.upload("image=new.img", operatorHdr, make([]byte, 8192))
	follow("the new image", func() bool { return slices.Contains(state["images"].([]string), "new.img") })
}

// pikvmLibPost is pikvm-lib's PiKVMAuxRequests._post
// (github.com/guanana/pikvm-lib, 35b3c08,
// src/pikvm_lib/pikvm_aux/pikvm_aux.py): requests.post with the query
// appended unencoded, the X-KVMD-User and X-KVMD-Passwd headers, and for
// an upload the open file as data, which requests sends with its size as
// Content-Length and no Content-Type. It ignores the answer.
func pikvmLibPost(t *testing.T, base, path, options string, data io.Reader) *http.Response {
	t.Helper()
	url := base + path
	if options != "" {
		url += "?" + options
	}
	req, err := http.NewRequest("POST", url, data)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-KVMD-User", "operator")
	req.Header.Set("X-KVMD-Passwd", "operator-pass")
	req.Header.Set("User-Agent", "python-requests/2.32.3")
	req.Header.Set("Accept-Encoding", "gzip, deflate")
	req.Header.Set("Accept", "*/*")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestPikvmLibMSD: every MSD call of pikvm-lib's PiKVMMSD
// (src/pikvm_lib/pikvm_msd.py) does what it says here.
func TestPikvmLibMSD(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, nil)
	img := randomBytes(1<<20 + 1)
	file := filepath.Join(t.TempDir(), "ubuntu.iso")
	os.WriteFile(file, img, 0o600)
	remote := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(img[:700<<10]))
	}))
	defer remote.Close()

	// upload_msd_image(filepath): image_name is the file's base name.
	f, _ := os.Open(file)
	fi, _ := f.Stat()
	req, _ := http.NewRequest("POST", e.base+"/api/msd/write?image=ubuntu.iso", f)
	req.ContentLength = fi.Size() // requests' super_len of an open file
	req.Header.Set("X-KVMD-User", "operator")
	req.Header.Set("X-KVMD-Passwd", "operator-pass")
	resp, err := http.DefaultClient.Do(req)
	f.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upload_msd_image: %v %v", resp, err)
	}
	resp.Body.Close()
	// upload_msd_remote(remote, image_name).
	if r := pikvmLibPost(t, e.base, "/api/msd/write_remote", "url="+remote.URL+"/x&image=remote.img", nil); r.StatusCode != 200 {
		t.Errorf("upload_msd_remote: %d", r.StatusCode)
	}
	// set_msd_parameters(image_name, cdrom=True, flash=False), connect_msd.
	for _, c := range []struct{ path, options string }{
		{"/api/msd/set_params", "image=ubuntu.iso&cdrom=1"},
		{"/api/msd/set_connected", "connected=1"},
	} {
		if r := pikvmLibPost(t, e.base, c.path, c.options, nil); r.StatusCode != 200 {
			t.Errorf("%s?%s: %d", c.path, c.options, r.StatusCode)
		}
	}
	// get_msd_state: json.loads(...)["result"].
	st := e.msdState(operatorHdr)
	if !st.Drive.Connected || !st.Drive.CDROM || st.Drive.Image.Name != "ubuntu.iso" || st.Storage.Images["remote.img"].Size != 700<<10 {
		t.Errorf("state: %+v %+v", st.Drive, st.Storage.Images)
	}
	// disconnect_msd, remove_msd_image, reset_msd.
	for _, c := range []struct{ path, options string }{
		{"/api/msd/set_connected", "connected=0"},
		{"/api/msd/remove", "image=remote.img"},
		{"/api/msd/reset", ""},
	} {
		if r := pikvmLibPost(t, e.base, c.path, c.options, nil); r.StatusCode != 200 {
			t.Errorf("%s?%s: %d", c.path, c.options, r.StatusCode)
		}
	}
	if got := e.files(); !slices.Equal(got, []string{"ubuntu.iso"}) {
		t.Errorf("storage holds %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(e.dir, "ubuntu.iso")); !bytes.Equal(got, img) {
		t.Error("the uploaded image differs")
	}
}

// TestKvmdWebUIUpload: kvmd's own web UI uploads with XMLHttpRequest to
// write?prefix=PART&image=NAME&remove_incomplete=1, PART "" for the main
// storage (github.com/pikvm/kvmd, f14596e8, web/share/js/kvm/msd.js).
func TestKvmdWebUIUpload(t *testing.T) {
	e := newMSDEnv(t, envOpts{}, 0, nil)
	if r := e.upload("prefix=&image=web.img&remove_incomplete=1", operatorHdr, make([]byte, 10000)); r.status != 200 {
		t.Errorf("kvmd web UI's upload: %d %s", r.status, r.body)
	}
	if r := e.upload("prefix=other&image=web2.img&remove_incomplete=1", operatorHdr, make([]byte, 10)); r.status != 400 || r.errName != "ValidatorError" {
		t.Errorf("a prefix naming a part that is not here: %d %s", r.status, r.errName)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "web.img")); errors.Is(err, os.ErrNotExist) {
		t.Error("web.img is not in the storage")
	}
}
