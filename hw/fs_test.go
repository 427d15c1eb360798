package hw

import (
	"bytes"
	"testing"
)

func TestReadFile(t *testing.T) {
	big := bytes.Repeat([]byte("x"), maxFileSize+100)
	fs := writeSysTree(t, map[string]string{
		"proc/uptime": "2911.46 11348.14\n",
		"empty":       "",
		"big":         string(big),
	})
	for _, tt := range []struct {
		rel  string
		want []byte
	}{
		{"proc/uptime", []byte("2911.46 11348.14\n")},
		{"empty", []byte{}},
		{"big", big[:maxFileSize]},
	} {
		got, err := fs.ReadFile(tt.rel)
		if err != nil || !bytes.Equal(got, tt.want) {
			t.Errorf("ReadFile(%s) = %d bytes, %v; want %d bytes", tt.rel, len(got), err, len(tt.want))
		}
	}
	// Results do not share the pooled buffer.
	a, _ := fs.ReadFile("proc/uptime")
	fs.ReadFile("big")
	if string(a) != "2911.46 11348.14\n" {
		t.Errorf("an earlier result changed to %q", a)
	}
	if _, err := fs.ReadFile("missing"); !Absent(err) {
		t.Errorf("ReadFile(missing) error = %v, want absent", err)
	}
}

func TestReadString(t *testing.T) {
	fs := writeSysTree(t, map[string]string{
		"proc/device-tree/model": "Raspberry Pi Compute Module 4 Rev 1.1\x00",
		"sys/class/udc/x/state":  "configured\n",
	})
	for rel, want := range map[string]string{
		"proc/device-tree/model": "Raspberry Pi Compute Module 4 Rev 1.1",
		"sys/class/udc/x/state":  "configured",
	} {
		if got, err := fs.ReadString(rel); err != nil || got != want {
			t.Errorf("ReadString(%s) = %q, %v; want %q", rel, got, err, want)
		}
	}
}
