package diag

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const hex64 = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0"

func TestRedactPatterns(t *testing.T) {
	r, err := NewRedactor(Secrets{}, false, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		in       string
		gone     string // must not be in the output
		keep     string // must stay
		wantSame bool
	}{
		{in: "X-KVMD-Passwd: hunter22", gone: "hunter22", keep: "X-KVMD-Passwd: "},
		{in: "curl -H 'X-KVMD-Passwd: hunter22' http://x", gone: "hunter22"},
		{in: "Authorization: Basic YWRtaW46aHVudGVyMjI=", gone: "YWRtaW46aHVudGVyMjI="},
		{in: "Cookie: auth_token=0123456789abcdef; other=1", gone: "0123456789abcdef"},
		{in: "GET /x?auth_token=0123456789abcdef&a=1", gone: "0123456789abcdef", keep: "&a=1"},
		{in: `{"user":"admin","passwd":"hunter22"}`, gone: "hunter22", keep: `"passwd":"[REDACTED]"`},
		{in: "kvmd serve --ldap-password hunter22 --users /etc/kvmd/htpasswd", gone: "hunter22", keep: "/etc/kvmd/htpasswd"},
		{in: "KVMD_TOKEN=abcdefgh12345678", gone: "abcdefgh12345678"},
		{in: "admin:$2y$05$abcdefghijklmnopqrstuv0123456789ABCDEFGHIJKLMNOPQRSTU", gone: "abcdefghijklmnopqrstuv"},
		{in: "bob:$apr1$salt1234$hashhashhashhashhash12", gone: "hashhashhash"},
		{in: "carol:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=", gone: "W6ph5Mm5Pz8GgiULbPgzG37mj9g="},
		{in: "otpauth://totp/kvmd:admin?secret=JBSWY3DPEHPK3PXP&issuer=kvmd", gone: "JBSWY3DPEHPK3PXP"},
		{in: "ldap-url: ldaps://binder:s3cretpw@ldap.example.org", gone: "s3cretpw", keep: "ldap.example.org"},
		{in: "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIBkeyline\n-----END EC PRIVATE KEY-----\n", gone: "MHcCAQEEIBkeyline"},
		{in: "totp-secret: /etc/kvmd/totp.secret", wantSame: true},
		{in: `auth failed user=admin method=xhdr addr=192.168.1.77 reason="wrong user or password"`, wantSame: true},
		{in: "tls: the private key does not match", wantSame: true},
		{in: "radius-secret-file: \"\"", wantSame: true},
		// Tokens by their form alone.
		{in: "path=/api/kvmd_" + hex64 + " status=404", gone: hex64, keep: "path=/api/[REDACTED] status=404"},
		{in: "path=/api/" + hex64 + "/x", gone: hex64, keep: "path=/api/[REDACTED]/x"},
		{in: "kvmd_0123456789abcdef01 cut short", gone: "0123456789abcdef01"},
		// What only looks alike stays: a metric's name, a boot ID (32).
		{in: "kvmd_cpu_temperature_celsius 62.3", wantSame: true},
		{in: "_BOOT_ID=6b766d64746573740000000000000002", wantSame: true},
	} {
		got := r.String(tt.in)
		if tt.wantSame && got != tt.in {
			t.Errorf("%q\n became %q, want it unchanged", tt.in, got)
		}
		if tt.gone != "" && strings.Contains(got, tt.gone) {
			t.Errorf("%q\n became %q, still holding %q", tt.in, got, tt.gone)
		}
		if tt.keep != "" && !strings.Contains(got, tt.keep) {
			t.Errorf("%q\n became %q, want %q kept", tt.in, got, tt.keep)
		}
	}
}

func TestRedactKnownSecrets(t *testing.T) {
	dir := t.TempDir()
	users := filepath.Join(dir, "htpasswd")
	totp := filepath.Join(dir, "totp.secret")
	os.WriteFile(users, []byte("admin:$2y$05$zzzzzzzzzzzzzzzzzzzzzuQbyl.9Mv7ZxXY0cuq6cU4ru9dyRDUvi\noperator:plainhashvalue\n"), 0o600)
	os.WriteFile(totp, []byte("JBSWY3DPEHPK3PXQ\n"), 0o600)
	r, err := NewRedactor(Secrets{Users: users, Files: []string{totp, filepath.Join(dir, "absent")}}, true, "kvm-lab")
	if err != nil {
		t.Fatal(err)
	}
	in := "the secret is JBSWY3DPEHPK3PXQ; operator's hash plainhashvalue; admin logged in from 10.1.2.3 and fe80::1%eth0 " +
		"on kvm-lab, mac dc:a6:32:01:02:03; user=mallory tried; mallory again; loopback 127.0.0.1 stays; version 1.2.3 stays"
	got := r.String(in)
	for _, gone := range []string{"JBSWY3DPEHPK3PXQ", "plainhashvalue", "admin", "operator", "10.1.2.3", "fe80::1", "kvm-lab", "dc:a6:32", "mallory"} {
		if strings.Contains(got, gone) {
			t.Errorf("%q is still in\n%s", gone, got)
		}
	}
	for _, keep := range []string{"127.0.0.1", "1.2.3", "%eth0", "user-1", "addr-1", "host-1", "mac-1"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q is missing from\n%s", keep, got)
		}
	}
	// The same name gets the same placeholder every time.
	if strings.Count(got, r.placeholder("user", "mallory")) != 2 {
		t.Errorf("mallory's placeholder is not used twice:\n%s", got)
	}
}

func TestRedactUnreadableSecret(t *testing.T) {
	dir := t.TempDir()
	if _, err := NewRedactor(Secrets{Files: []string{dir}}, false, ""); err == nil {
		t.Error("a secret file that cannot be read (a directory) gave no error: its secret would be left in the bundle")
	}
}

// FuzzRedact: a known secret never survives, whatever text surrounds it
// (the patterns and the identity placeholders run after the known
// secrets are replaced, and must not rebuild one).
func FuzzRedact(f *testing.F) {
	f.Add("X-KVMD-Passwd: ", "\n", "admin")
	f.Add(`{"passwd":"`, `"}`, "user=bob")
	f.Add("-----BEGIN PRIVATE KEY-----\n", "\n-----END PRIVATE KEY-----", "10.0.0.1")
	f.Add("ldaps://u:", "@host", "fe80::1")
	f.Fuzz(func(t *testing.T, before, after, name string) {
		const secret = "Fuzz-S3cret-Value"
		r, err := NewRedactor(Secrets{Values: []string{secret}, Names: []string{name}}, true, "kvm-host")
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []string{before + secret + after, before + secret + after + "\n" + secret, name + "=" + secret} {
			if out := r.String(in); strings.Contains(out, secret) {
				t.Errorf("%q\n became %q", in, out)
			}
		}
	})
}
