package webtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"kvmd/client/clienttest"
)

// TestWebUIMSD drives the dashboard's virtual media card against the demo
// (its drive is the msdtest stand-in, its storage a directory the test
// reads): an upload with its progress, choosing the image and connecting
// it as a CD-ROM, disconnecting, deleting with a confirmation, cancelling
// an upload, reloading the page in the middle of one, and the progress of
// an upload from another client. A cut upload leaves nothing on disk.
func TestWebUIMSD(t *testing.T) {
	users := clienttest.Users(t, kvmdBin, "admin", "web pass")
	store := t.TempDir()
	os.WriteFile(filepath.Join(store, "tools.img"), bytes.Repeat([]byte("t"), 4096), 0o600)
	d := clienttest.Start(t, kvmdBin, nil, "--demo", "--users", users, "--msd-dir", store)
	ctx := startBrowser(t)
	// A reload in the middle of an upload asks first (beforeunload): yes.
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go chromedp.Run(ctx, page.HandleJavaScriptDialog(true))
		}
	})
	act(t, ctx, "login page", chromedp.Navigate(d.URL+"/login"), ready)
	login(t, ctx, "admin", "web pass", "")
	act(t, ctx, "dashboard", chromedp.WaitVisible(`#msd[data-live="1"]`, chromedp.ByQuery), chromedp.WaitVisible("#msd-body", chromedp.ByQuery))
	waitText(t, ctx, "#msd-images", "tools.img")
	waitText(t, ctx, "#msd-drive", "No image chosen")

	// Upload an ISO from this browser: it lands whole in the storage.
	iso := make([]byte, 3<<20)
	rand.Read(iso)
	src := filepath.Join(t.TempDir(), "debian.iso")
	os.WriteFile(src, iso, 0o600)
	act(t, ctx, "choose the file", chromedp.SetUploadFiles("#msd-file", []string{src}, chromedp.ByQuery))
	act(t, ctx, "upload", chromedp.Click("#msd-upload", chromedp.ByQuery))
	waitText(t, ctx, "#msd-msg", "debian.iso uploaded.")
	waitText(t, ctx, "#msd-images", "debian.iso")
	if got, err := os.ReadFile(filepath.Join(store, "debian.iso")); err != nil || !bytes.Equal(got, iso) {
		t.Fatalf("the uploaded image on disk differs (%v)", err)
	}

	// Choose it (an .iso: CD-ROM), connect, see it connected.
	act(t, ctx, "choose debian.iso", setSelect("#msd-image", "debian.iso"))
	var cdrom, rwDisabled bool
	act(t, ctx, "mode", chromedp.Evaluate(`document.getElementById('msd-cdrom').checked`, &cdrom),
		chromedp.Evaluate(`document.getElementById('msd-rw').disabled`, &rwDisabled))
	if !cdrom || !rwDisabled {
		t.Errorf("an .iso: CD-ROM %v, writable disabled %v; want both", cdrom, rwDisabled)
	}
	act(t, ctx, "connect", chromedp.Click("#msd-connect", chromedp.ByQuery))
	waitText(t, ctx, "#msd-drive", "Connected to the host: debian.iso (CD-ROM)")
	var delDisabled bool
	act(t, ctx, "delete disabled", chromedp.Evaluate(`document.querySelector('#msd-images button[data-image="debian.iso"]').disabled`, &delDisabled))
	if !delDisabled {
		t.Error("the connected image can be deleted")
	}
	screenshot(t, ctx, "msd")
	act(t, ctx, "disconnect", chromedp.Click("#msd-disconnect", chromedp.ByQuery))
	waitText(t, ctx, "#msd-drive", "Chosen, not connected: debian.iso")

	// Delete asks first; Cancel keeps it, Delete removes it.
	act(t, ctx, "delete tools.img", clickNow(`#msd-images button[data-image="tools.img"]`),
		chromedp.WaitVisible("#msd-confirm", chromedp.ByQuery), chromedp.Click("#msd-confirm-no", chromedp.ByQuery))
	if _, err := os.Stat(filepath.Join(store, "tools.img")); err != nil {
		t.Fatalf("cancelled delete removed the image: %v", err)
	}
	act(t, ctx, "delete tools.img", clickNow(`#msd-images button[data-image="tools.img"]`),
		chromedp.WaitVisible("#msd-confirm", chromedp.ByQuery), chromedp.Click("#msd-confirm-yes", chromedp.ByQuery))
	waitText(t, ctx, "#msd-msg", "tools.img deleted.")
	if _, err := os.Stat(filepath.Join(store, "tools.img")); !os.IsNotExist(err) {
		t.Errorf("tools.img after delete: %v", err)
	}

	// A slow link (the browser throttles its uploads), then Cancel.
	big := filepath.Join(t.TempDir(), "big.img")
	os.WriteFile(big, make([]byte, 8<<20), 0o600)
	act(t, ctx, "throttle", network.Enable(), network.EmulateNetworkConditions(false, 0, -1, 512<<10))
	act(t, ctx, "upload big.img", chromedp.SetUploadFiles("#msd-file", []string{big}, chromedp.ByQuery),
		chromedp.Click("#msd-upload", chromedp.ByQuery), chromedp.WaitVisible("#msd-progress", chromedp.ByQuery))
	waitProgress(t, ctx, 5)
	act(t, ctx, "cancel", chromedp.Click("#msd-cancel", chromedp.ByQuery))
	waitText(t, ctx, "#msd-msg", "Upload cancelled; nothing was kept.")
	waitStorage(t, store, "debian.iso")

	// Again, and reload the page in the middle: the reload cuts the
	// upload, and the page says so from the server's state.
	act(t, ctx, "upload big.img", chromedp.SetUploadFiles("#msd-file", []string{big}, chromedp.ByQuery),
		chromedp.Click("#msd-upload", chromedp.ByQuery), chromedp.WaitVisible("#msd-progress", chromedp.ByQuery))
	waitProgress(t, ctx, 5)
	act(t, ctx, "reload", chromedp.Reload())
	act(t, ctx, "reloaded", chromedp.WaitVisible(`#msd[data-live="1"]`, chromedp.ByQuery))
	waitText(t, ctx, "#msd-msg", "The upload of big.img was interrupted")
	waitStorage(t, store, "debian.iso")
	act(t, ctx, "unthrottle", network.EmulateNetworkConditions(false, 0, -1, -1))

	// Another client uploads: its progress shows here, from the server.
	c, err := net.Dial("tcp", d.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /api/msd/write?image=other.img HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\nAuthorization: Basic YWRtaW46d2ViIHBhc3M=\r\n\r\n", d.Addr, 2<<20)
	c.Write(make([]byte, 1<<20))
	act(t, ctx, "server progress", chromedp.WaitVisible(`#msd-progress[data-source="server"]`, chromedp.ByQuery))
	waitText(t, ctx, "#msd-progress-text", "Uploading other.img: 1.0 MiB of 2.0 MiB (50 %) (from another window or client)")
	c.Write(make([]byte, 1<<20))
	waitText(t, ctx, "#msd-images", "other.img")
	act(t, ctx, "progress gone", chromedp.WaitNotVisible("#msd-progress", chromedp.ByQuery))
}

// setSelect chooses value in the select sel, as a user would (a change
// event).
func setSelect(sel, value string) chromedp.Action {
	return chromedp.Evaluate(`(() => { const e = document.querySelector(`+jsString(sel)+`); e.value = `+jsString(value)+
		`; e.dispatchEvent(new Event('change', {bubbles: true})); })()`, nil)
}

// waitProgress waits until the progress bar shows at least pct.
func waitProgress(t *testing.T, ctx context.Context, pct int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var v int
		chromedp.Run(ctx, chromedp.Evaluate(`document.getElementById('msd-progress-bar').value`, &v))
		if v >= pct {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("progress at %d %%, want %d", v, pct)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitStorage waits until the storage directory holds exactly names: a
// cut upload leaves no file, not even a hidden one.
func waitStorage(t *testing.T, dir string, names ...string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ := os.ReadDir(dir)
		var got []string
		for _, e := range ents {
			got = append(got, e.Name())
		}
		if strings.Join(got, " ") == strings.Join(names, " ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the storage holds %q, want %q", got, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// clickNow clicks the element sel finds in one step inside the page. The
// image table is drawn anew on every state event (a disconnect sends a few):
// chromedp's Click finds the node, then scrolls to it and clicks at its box
// in separate calls, and fails with "Could not find node" when the table
// was redrawn between them.
func clickNow(sel string) chromedp.Action {
	return chromedp.Evaluate(fmt.Sprintf(`document.querySelector(%q).click()`, sel), nil)
}
