package radiusauth

import (
	"strings"
	"testing"
	"time"
)

func TestServerAddr(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"radius.example.org", "radius.example.org:1812"},
		{"radius.example.org:1645", "radius.example.org:1645"},
		{"10.0.0.1", "10.0.0.1:1812"},
		{"10.0.0.1:18120", "10.0.0.1:18120"},
		{"::1", "[::1]:1812"},
		{"[::1]", "[::1]:1812"},
		{"[fe80::1%eth0]:1812", "[fe80::1%eth0]:1812"},
		{"[::1]:1645", "[::1]:1645"},
		{"", ""},
		{":1812", ""},
		{"host:", ""},
		{"host:0", ""},
		{"host:65536", ""},
		{"host:radius", ""},
		{"a b:1812", ""},
		{"host\n", ""},
		{"[host]", ""},
		{"1:2:3:zz", ""},
		{"http://host", ""},
	} {
		got, err := serverAddr(tc.in)
		if tc.want == "" {
			if err == nil {
				t.Errorf("serverAddr(%q) = %q, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("serverAddr(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestNew(t *testing.T) {
	ok := Config{Server: "127.0.0.1", Secret: []byte("s3cret")}
	b, err := New(ok)
	if err != nil {
		t.Fatal(err)
	}
	if b.server != "127.0.0.1:1812" || b.timeout != DefaultTimeout || b.retries != 0 || b.nasID != "kvmd" || b.Name() != "radius" {
		t.Errorf("New(%+v) = %+v", ok, b)
	}
	secret := []byte("s3cret")
	b, err = New(Config{Server: "::1", Secret: secret, Timeout: time.Second, Retries: 3, NASIdentifier: "pikvm-1"})
	if err != nil {
		t.Fatal(err)
	}
	secret[0] = 'x'
	if b.server != "[::1]:1812" || b.timeout != time.Second || b.retries != 3 || b.nasID != "pikvm-1" || string(b.secret) != "s3cret" {
		t.Errorf("New = %+v (the secret must be copied)", b)
	}

	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no server", func(c *Config) { c.Server = "" }, "no server"},
		{"bad server", func(c *Config) { c.Server = "host:port" }, "port"},
		{"no secret", func(c *Config) { c.Secret = nil }, "secret"},
		{"secret with newline", func(c *Config) { c.Secret = []byte("s3cret\n") }, "newline"},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "timeout"},
		{"negative retries", func(c *Config) { c.Retries = -1 }, "retries"},
		{"too many retries", func(c *Config) { c.Retries = MaxRetries + 1 }, "retries"},
		{"NAS-Identifier with control characters", func(c *Config) { c.NASIdentifier = "kvm\x1b[2J" }, "NAS-Identifier"},
		{"long NAS-Identifier", func(c *Config) { c.NASIdentifier = strings.Repeat("n", 254) }, "NAS-Identifier"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.edit(&cfg)
			b, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, %v; want an error about %q", cfg, b, err, tc.want)
			}
		})
	}
}
