package hw

import (
	"testing"
	"time"
)

func TestParseUptime(t *testing.T) {
	tests := []struct {
		name, in string
		want     time.Duration
		wantErr  bool
	}{
		{"pi 4", "350735.47 1392841.22\n", 350735*time.Second + 470*time.Millisecond, false},
		{"x86", "1662.39 1476.95\n", 1662*time.Second + 390*time.Millisecond, false},
		{"just booted", "0.00 0.00\n", 0, false},
		{"whole seconds", "12", 12 * time.Second, false},
		{"nanoseconds kept, beyond dropped", "1.1234567891 0", time.Second + 123456789, false},
		{"largest", "9223372036.85 0", 9223372036*time.Second + 850*time.Millisecond, false},
		{"empty", "", 0, true},
		{"garbage", "soon\n", 0, true},
		{"negative", "-1.50 0.00\n", 0, true},
		{"exponent", "1e3 0\n", 0, true},
		{"nan", "NaN 0\n", 0, true},
		{"trailing point", "1. 0\n", 0, true},
		{"leading point", ".5 0\n", 0, true},
		{"two points", "1.2.3 0\n", 0, true},
		{"huge", "99999999999999999999.00 0\n", 0, true},
		{"past max duration", "9223372036.86 0\n", 0, true},
		{"beyond max duration", "9223372037.00 0\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseUptime([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseUptime(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestUptimeFS(t *testing.T) {
	got, err := writeSysTree(t, map[string]string{"proc/uptime": "1662.39 1476.95\n"}).Uptime()
	if err != nil || got != 1662390*time.Millisecond {
		t.Errorf("Uptime() = %v, %v, want 27m42.39s", got, err)
	}
}
