package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

func TestTrustedProxyConfig(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	file := filepath.Join(t.TempDir(), "kvmd.yaml")
	os.WriteFile(file, []byte("users: "+users+"\ntrusted-proxy: [10.0.0.0/8, \"2001:db8::1\"]\nmax-connections: 300\nmax-connections-per-address: 7\n"), 0o600)
	tests := []struct {
		name    string
		args    []string
		want    []string
		conns   [2]int
		wantErr string
	}{
		{"default: none", []string{"--users", users}, nil, [2]int{1024, 64}, ""},
		{"flags, repeatable, a bare address is one host", []string{"--users", users, "--trusted-proxy", "192.0.2.0/24", "--trusted-proxy", "127.0.0.1"},
			[]string{"192.0.2.0/24", "127.0.0.1/32"}, [2]int{1024, 64}, ""},
		{"config file", []string{"--config", file}, []string{"10.0.0.0/8", "2001:db8::1/128"}, [2]int{300, 7}, ""},
		{"flag replaces the file's list", []string{"--config", file, "--trusted-proxy", "172.16.0.0/12", "--max-connections", "50"},
			[]string{"172.16.0.0/12"}, [2]int{50, 7}, ""},
		{"not a network", []string{"--users", users, "--trusted-proxy", "proxy.example"}, nil, [2]int{}, "--trusted-proxy"},
		{"host bits set", []string{"--users", users, "--trusted-proxy", "10.1.2.3/8"}, nil, [2]int{}, "--trusted-proxy"},
		{"no connections", []string{"--users", users, "--max-connections", "0"}, nil, [2]int{}, "--max-connections"},
		{"per address above total", []string{"--users", users, "--max-connections", "10", "--max-connections-per-address", "11"}, nil, [2]int{}, "--max-connections-per-address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseServe(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			nets, err := cfg.TrustedProxies()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range nets {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("trusted proxies %q, want %q", got, tt.want)
			}
			if c := [2]int{cfg.MaxConnections, cfg.MaxConnectionsPerAddress}; c != tt.conns {
				t.Errorf("connection caps %v, want %v", c, tt.conns)
			}
		})
	}
}

// TestTrustedProxyServe: the daemon believes X-Real-IP from a trusted proxy
// only, and caps connections per address.
func TestTrustedProxyServe(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	addr := testutil.FreeAddr(t)
	d := startDaemon(t, nil, nil, "serve", "--users", users, "--listen", addr,
		"--trusted-proxy", "127.0.0.2/32", "--max-connections-per-address", "3")
	defer d.stop(t)
	d.stderr.wait(t, `kvmd listening`)
	from := func(src, realIP string) {
		t.Helper()
		tr := &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}).DialContext}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/auth/check", nil)
		req.Header.Set("X-Real-IP", realIP)
		req.SetBasicAuth("admin", "wrong")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	from("127.0.0.2", "192.0.2.9")
	d.stderr.wait(t, `auth failed.*addr=192\.0\.2\.9`)
	from("127.0.0.4", "192.0.2.10")
	d.stderr.wait(t, `auth failed.*addr=127\.0\.0\.4`)
	if strings.Contains(d.stderr.String(), "addr=192.0.2.10") {
		t.Error("X-Real-IP from an untrusted peer was believed")
	}

	var conns []net.Conn
	for range 4 {
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.5")}}).Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	conns[3].SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := conns[3].Read(make([]byte, 1)); err == nil || os.IsTimeout(err) {
		t.Errorf("the fourth connection from one address: %v, want it closed", err)
	}
}

// TestWebSocketShareConfig: --max-websockets-per-user and its config key,
// 16 by default, at least 1.
func TestWebSocketShareConfig(t *testing.T) {
	users := usersFile(t, "admin", "pw")
	file := filepath.Join(t.TempDir(), "kvmd.yaml")
	os.WriteFile(file, []byte("users: "+users+"\nmax-websockets-per-user: 3\n"), 0o600)
	for _, tt := range []struct {
		args    []string
		want    int
		wantErr bool
	}{
		{[]string{"--users", users}, 16, false},
		{[]string{"--config", file}, 3, false},
		{[]string{"--config", file, "--max-websockets-per-user", "40"}, 40, false},
		{[]string{"--users", users, "--max-websockets-per-user", "0"}, 0, true},
	} {
		cfg, err := parseServe(tt.args, io.Discard)
		if tt.wantErr {
			if err == nil || !strings.Contains(err.Error(), "--max-websockets-per-user") {
				t.Errorf("%v: err %v, want one naming --max-websockets-per-user", tt.args, err)
			}
			continue
		}
		if err != nil || cfg.MaxWebSocketsPerUser != tt.want {
			t.Errorf("%v: %d, %v; want %d", tt.args, cfg.MaxWebSocketsPerUser, err, tt.want)
		}
	}
}
