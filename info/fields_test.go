package info

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseFields(t *testing.T) {
	tests := []struct {
		arg    string
		legacy bool
		want   []string
		bad    string
	}{
		{"", true, []string{"auth", "extras", "fan", "hw", "meta", "node", "system", "uptime"}, ""},
		{"", false, []string{"auth", "extras", "fan", "gpio", "health", "meta", "node", "system", "uptime", "usb", "video"}, ""},
		{"   ,, \t", true, []string{"auth", "extras", "fan", "hw", "meta", "node", "system", "uptime"}, ""},
		{"hw", true, []string{"hw"}, ""},
		{"HW,System", true, []string{"hw", "system"}, ""},
		{"system hw\thealth", true, []string{"health", "hw", "system"}, ""},
		{"node,node,NODE", true, []string{"node"}, ""},
		{"uptime, fan", false, []string{"fan", "uptime"}, ""},
		{"hw", false, nil, "hw"},
		{"system,nope", true, nil, "nope"},
		{"sys", true, nil, "sys"},
		{"\xff", true, nil, "\ufffd"}, // lower-casing makes invalid UTF-8 U+FFFD
	}
	for _, tt := range tests {
		got, err := ParseFields(tt.arg, tt.legacy)
		if tt.bad != "" {
			var ue *UnknownFieldError
			if !errors.As(err, &ue) || ue.Name != tt.bad {
				t.Errorf("ParseFields(%q, %v) = %v, %v; want unknown %q", tt.arg, tt.legacy, got, err, tt.bad)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ParseFields(%q, %v) = %v, %v; want %v", tt.arg, tt.legacy, got, err, tt.want)
		}
	}
}

func TestUnknownFieldMessage(t *testing.T) {
	msg := (&UnknownFieldError{Name: strings.Repeat("x", 1000) + "\xff"}).Error()
	if len(msg) > 80 || !strings.Contains(msg, "unknown category") {
		t.Errorf("message %q: want a short sentence", msg)
	}
}

func FuzzParseFields(f *testing.F) {
	for _, s := range []string{"", "hw", "HW,system", "a b\tc", ",,,", "health,\xff"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, arg string, legacy bool) {
		got, err := ParseFields(arg, legacy)
		if err != nil {
			var ue *UnknownFieldError
			if !errors.As(err, &ue) {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if len(got) == 0 || !slices.IsSorted(got) {
			t.Fatalf("ParseFields(%q) = %v: want a non-empty sorted list", arg, got)
		}
		all := Available(legacy)
		for i, c := range got {
			if !slices.Contains(all, c) || (i > 0 && got[i-1] == c) {
				t.Fatalf("ParseFields(%q) = %v: unknown or repeated %q", arg, got, c)
			}
		}
	})
}
