package auth

import (
	"strings"
	"testing"
)

func TestLooksLikeToken(t *testing.T) {
	hex64 := strings.Repeat("0a1b2c3d", 8)
	for _, tc := range []struct {
		s    string
		want bool
	}{
		{TokenPrefix + hex64, true},
		{hex64, true},
		{strings.ToUpper(hex64), true},
		{TokenPrefix + "0123abcd", true}, // a token cut short
		{TokenPrefix + "0123abc", false},
		{"x" + hex64[:32] + "y", true},
		{hex64[:31], false},
		{"admin", false},
		{"kvmd_cpu_temperature_celsius", false},
		{"kvmd_logo.svg", false},
		{"", false},
	} {
		if got := LooksLikeToken(tc.s); got != tc.want {
			t.Errorf("LooksLikeToken(%q) = %v, want %v", tc.s, got, tc.want)
		}
	}
	if LogName(TokenPrefix+hex64) != "[token]" || LogName("admin") != "admin" {
		t.Error("LogName")
	}
}
