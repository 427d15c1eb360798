package export

import (
	"bytes"
	"testing"
	"time"
)

func TestWrite(t *testing.T) {
	var b bytes.Buffer
	boot := time.Unix(1000, 0)
	fields := append(Timestamps(time.Unix(1060, 5000), boot),
		F("_SYSTEMD_UNIT", "kvmd.service"), F("MESSAGE", "two\nlines"), Field{"BIN", []byte{0xff, 0}})
	if err := Write(&b, fields); err != nil {
		t.Fatal(err)
	}
	want := "__REALTIME_TIMESTAMP=1060000005\n__MONOTONIC_TIMESTAMP=60000005\n_SYSTEMD_UNIT=kvmd.service\n" +
		"MESSAGE\n\x09\x00\x00\x00\x00\x00\x00\x00two\nlines\n" +
		"BIN\n\x02\x00\x00\x00\x00\x00\x00\x00\xff\x00\n\n"
	if b.String() != want {
		t.Errorf("got %q\nwant %q", b.String(), want)
	}
	for _, bad := range []string{"", "lower", "9X", "A-B"} {
		if err := Write(&b, []Field{F(bad, "x")}); err == nil {
			t.Errorf("field name %q accepted", bad)
		}
	}
}
