package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kvmd/client/clienttest"
)

// TestMSDBench runs the virtual media rows against the real kvmd (the demo
// build, as make bench measures it), with a small image: three rounds of
// each copy, figures that make sense, nothing left behind.
func TestMSDBench(t *testing.T) {
	dir := t.TempDir()
	kvmd, err := clienttest.Build(dir)
	if err != nil {
		t.Fatal(err)
	}
	users := filepath.Join(dir, "htpasswd")
	if err := addUser(context.Background(), kvmd, users, benchUser, "bench pass"); err != nil {
		t.Fatal(err)
	}
	var procs children
	defer procs.stopAll(0)
	work := filepath.Join(dir, "work")
	os.Mkdir(work, 0o700)
	res, err := runMSDBench(context.Background(), &procs, kvmd, users, "bench pass", work, 8<<20, t.Logf)
	if err != nil || res.failure() != nil {
		t.Fatalf("%v %v", err, res.failure())
	}
	if len(res.cat) != msdRounds || len(res.kvmd) != msdRounds || res.rssBefore <= 0 {
		t.Fatalf("result %+v", res)
	}
	for i := range res.kvmd {
		if res.kvmd[i] <= 0 || res.cat[i] <= 0 || res.rssMax[i] < res.rssBefore/2 || res.cpu[i] < 0 {
			t.Errorf("round %d: cat %v kvmd %v rss %d cpu %v", i, res.cat[i], res.kvmd[i], res.rssMax[i], res.cpu[i])
		}
	}
	var b bytes.Buffer
	writeMSD(&b, res)
	for _, want := range []string{"| 5 |", "8 MiB upload through kvmd / cat+sync", "kvmd VmRSS during the uploads"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("section lacks %q:\n%s", want, b.String())
		}
	}
	for _, d := range []string{"msd", "cat"} {
		if ents, _ := os.ReadDir(filepath.Join(work, d)); len(ents) != 0 {
			t.Errorf("%s holds %d files after the run", d, len(ents))
		}
	}
}
