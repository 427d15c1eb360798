package ldapauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/auth/backend"
	"kvmd/auth/ldapauth"
	"kvmd/auth/ldapauth/ldaptest"
)

// want is what a Verify must return: nil, or an error wrapping one of the
// backend's two.
type want int

const (
	ok want = iota
	rejected
	unavailable
)

func (w want) String() string { return [...]string{"nil", "ErrRejected", "ErrUnavailable"}[w] }

// check fails the test unless err is w, and when it is an error, unless
// it leaves out the password.
func check(t *testing.T, err error, w want, passwd string) {
	t.Helper()
	switch w {
	case ok:
		if err != nil {
			t.Fatalf("Verify: %v, want nil", err)
		}
		return
	case rejected:
		if !errors.Is(err, backend.ErrRejected) || errors.Is(err, backend.ErrUnavailable) {
			t.Fatalf("Verify: %v, want ErrRejected", err)
		}
	case unavailable:
		if !errors.Is(err, backend.ErrUnavailable) || errors.Is(err, backend.ErrRejected) {
			t.Fatalf("Verify: %v, want ErrUnavailable", err)
		}
	}
	if passwd != "" && strings.Contains(err.Error(), passwd) {
		t.Errorf("error %q has the password in it", err)
	}
}

func TestVerify(t *testing.T) {
	s := ldaptest.Start(t)
	alice, bob, carol, smith := ldaptest.Alice, ldaptest.Bob, ldaptest.Carol, ldaptest.Smith
	ldaps := ldapauth.Config{URL: s.TLSURL, CAFile: s.CAFile, UserTemplate: ldaptest.UserTemplate, Timeout: 5 * time.Second}
	startTLS := ldaps
	startTLS.URL, startTLS.StartTLS = s.URL, true
	with := func(c ldapauth.Config, f func(*ldapauth.Config)) ldapauth.Config {
		f(&c)
		return c
	}
	group := func(g string) func(*ldapauth.Config) { return func(c *ldapauth.Config) { c.Group = g } }
	for _, tc := range []struct {
		name         string
		cfg          ldapauth.Config
		user, passwd string
		want         want
	}{
		{"ldaps", ldaps, alice.Name, alice.Password, ok},
		{"starttls", startTLS, alice.Name, alice.Password, ok},
		{"ldaps localhost", with(ldaps, func(c *ldapauth.Config) {
			c.URL = strings.Replace(s.TLSURL, "127.0.0.1", "localhost", 1)
		}), bob.Name, bob.Password, ok},
		{"plain ldap on loopback", with(startTLS, func(c *ldapauth.Config) { c.StartTLS = false }), alice.Name, alice.Password, ok},
		{"wrong password", ldaps, alice.Name, "alice-secreT", rejected},
		{"wrong password starttls", startTLS, alice.Name, bob.Password, rejected},
		{"other user's password", ldaps, bob.Name, alice.Password, rejected},
		{"unknown user", ldaps, "mallory", alice.Password, rejected},
		{"empty password", ldaps, alice.Name, "", rejected},
		{"empty user", ldaps, "", alice.Password, rejected},
		{"comma escaped", ldaps, smith.Name, smith.Password, ok},
		{"comma injected", ldaps, "alice,ou=people", alice.Password, rejected},
		{"star", ldaps, "*", alice.Password, rejected},
		{"filter syntax", ldaps, "alice)(uid=*", alice.Password, rejected},
		{"DN syntax", ldaps, `a\,b+c=d;<"x">#`, alice.Password, rejected},
		{"leading space", ldaps, " alice", alice.Password, rejected},
		{"trailing space", ldaps, "alice ", alice.Password, rejected},
		{"trailing tab", ldaps, "alice\t", alice.Password, rejected},
		{"NUL", ldaps, "alice\x00", alice.Password, rejected},
		{"newline", ldaps, "alice\n", alice.Password, rejected},
		{"not UTF-8", ldaps, "alice\xff", alice.Password, rejected},
		{"group member", with(ldaps, group(ldaptest.Group)), alice.Name, alice.Password, ok},
		{"group member escaped", with(startTLS, group(ldaptest.Group)), smith.Name, smith.Password, ok},
		{"not in group", with(ldaps, group(ldaptest.Group)), bob.Name, bob.Password, rejected},
		{"group wrong password", with(ldaps, group(ldaptest.Group)), alice.Name, "wrong-Pa55", rejected},
		{"uniqueMember", with(ldaps, group(ldaptest.UniqueGroup)), bob.Name, bob.Password, ok},
		{"not in uniqueMember group", with(ldaps, group(ldaptest.UniqueGroup)), alice.Name, alice.Password, rejected},
		{"memberOf", with(ldaps, group(ldaptest.MemberOfGroup)), carol.Name, carol.Password, ok},
		{"no memberOf", with(ldaps, group(ldaptest.MemberOfGroup)), alice.Name, alice.Password, rejected},
		{"group missing", with(ldaps, group("cn=nope,ou=groups,"+ldaptest.BaseDN)), alice.Name, alice.Password, unavailable},
		{"untrusted ldaps", with(ldaps, func(c *ldapauth.Config) { c.CAFile = "" }), alice.Name, alice.Password, unavailable},
		{"untrusted starttls", with(startTLS, func(c *ldapauth.Config) { c.CAFile = "" }), alice.Name, alice.Password, unavailable},
		{"insecure ldaps", with(ldaps, func(c *ldapauth.Config) { c.CAFile, c.InsecureSkipVerify = "", true }), alice.Name, alice.Password, ok},
		{"insecure starttls", with(startTLS, func(c *ldapauth.Config) { c.CAFile, c.InsecureSkipVerify = "", true }), alice.Name, alice.Password, ok},
		{"insecure still checks", with(ldaps, func(c *ldapauth.Config) { c.CAFile, c.InsecureSkipVerify = "", true }), alice.Name, "wrong-Pa55", rejected},
		{"ldaps to the plain port", with(ldaps, func(c *ldapauth.Config) {
			c.URL = strings.Replace(s.URL, "ldap:", "ldaps:", 1)
		}), alice.Name, alice.Password, unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ldapauth.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Name(); got != "ldap" {
				t.Errorf("Name() = %q, want ldap", got)
			}
			err = b.Verify(t.Context(), tc.user, tc.passwd)
			check(t, err, tc.want, tc.passwd)
			if err != nil {
				t.Log(err)
			}
		})
	}
}

// TestVerifyUnreachable checks that a server that is down, or that never
// answers, is ErrUnavailable by the deadline, from Config.Timeout or ctx.
func TestVerifyUnreachable(t *testing.T) {
	ca := writeCA(t)
	closed := closedPort(t)
	silent := silentServer(t)
	const timeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name     string
		url      string
		startTLS bool
		ctxTime  time.Duration // 0: no ctx deadline
		max      time.Duration
	}{
		{"down ldaps", "ldaps://" + closed, false, 0, 300 * time.Millisecond},
		{"down starttls", "ldap://" + closed, true, 0, 300 * time.Millisecond},
		{"silent ldaps", "ldaps://" + silent, false, 0, timeout + time.Second},
		{"silent starttls", "ldap://" + silent, true, 0, timeout + time.Second},
		{"silent plain", "ldap://" + silent, false, 0, timeout + time.Second},
		{"silent ctx deadline", "ldaps://" + silent, false, 200 * time.Millisecond, 200*time.Millisecond + time.Second},
		{"silent ctx deadline starttls", "ldap://" + silent, true, 200 * time.Millisecond, 200*time.Millisecond + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ldapauth.New(ldapauth.Config{URL: tc.url, StartTLS: tc.startTLS, CAFile: ca,
				UserTemplate: ldaptest.UserTemplate, Timeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			ctx := t.Context()
			if tc.ctxTime > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxTime)
				defer cancel()
			}
			start := time.Now()
			err = b.Verify(ctx, "alice", "alice-secret")
			elapsed := time.Since(start)
			check(t, err, unavailable, "alice-secret")
			if strings.HasPrefix(tc.name, "silent") && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Verify: %v, want it to wrap context.DeadlineExceeded", err)
			}
			if elapsed > tc.max {
				t.Errorf("Verify took %v, want at most %v", elapsed, tc.max)
			}
			t.Logf("%v after %v", err, elapsed)
		})
	}

	t.Run("cancel", func(t *testing.T) {
		b, err := ldapauth.New(ldapauth.Config{URL: "ldaps://" + silent, CAFile: ca,
			UserTemplate: ldaptest.UserTemplate, Timeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(200*time.Millisecond, cancel)
		start := time.Now()
		err = b.Verify(ctx, "alice", "alice-secret")
		check(t, err, unavailable, "alice-secret")
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Verify: %v, want it to wrap context.Canceled", err)
		}
		if elapsed := time.Since(start); elapsed > 1200*time.Millisecond {
			t.Errorf("Verify took %v after a cancel at 200ms", elapsed)
		}
	})
}

// TestVerifyConcurrent runs Verify calls of every outcome at once on one
// Backend, for the race detector.
func TestVerifyConcurrent(t *testing.T) {
	s := ldaptest.Start(t)
	b, err := ldapauth.New(ldapauth.Config{URL: s.TLSURL, CAFile: s.CAFile,
		UserTemplate: ldaptest.UserTemplate, Group: ldaptest.Group, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		user, passwd string
		want         want
	}{
		{ldaptest.Alice.Name, ldaptest.Alice.Password, ok},
		{ldaptest.Smith.Name, ldaptest.Smith.Password, ok},
		{ldaptest.Alice.Name, "nope", rejected},
		{ldaptest.Bob.Name, ldaptest.Bob.Password, rejected},
	}
	before := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make([]error, 8*len(cases))
	for i := range errs {
		wg.Go(func() {
			c := cases[i%len(cases)]
			errs[i] = b.Verify(t.Context(), c.user, c.passwd)
		})
	}
	wg.Wait()
	for i, err := range errs {
		c := cases[i%len(cases)]
		t.Run(c.user+"/"+c.want.String(), func(t *testing.T) { check(t, err, c.want, c.passwd) })
	}

	// Every connection's reader and dispatcher have ended: Verify closed
	// them all.
	for deadline := time.Now().Add(2 * time.Second); runtime.NumGoroutine() > before; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before the Verify calls, %d after:\n%s",
				before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	}
}

func TestNew(t *testing.T) {
	dir := t.TempDir()
	ca := writeCA(t)
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const tmpl = "uid={user},ou=people,dc=example,dc=org"
	for _, tc := range []struct {
		name  string
		cfg   ldapauth.Config
		valid bool
	}{
		{"ldaps", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: tmpl}, true},
		{"ldaps port slash", ldapauth.Config{URL: "ldaps://ldap.example.org:1636/", UserTemplate: tmpl}, true},
		{"starttls", ldapauth.Config{URL: "ldap://ldap.example.org", StartTLS: true, UserTemplate: tmpl}, true},
		{"ca file", ldapauth.Config{URL: "ldaps://ldap.example.org", CAFile: ca, UserTemplate: tmpl}, true},
		{"insecure", ldapauth.Config{URL: "ldaps://ldap.example.org", InsecureSkipVerify: true, UserTemplate: tmpl}, true},
		{"plain loopback", ldapauth.Config{URL: "ldap://127.0.0.1:3389", UserTemplate: tmpl}, true},
		{"plain loopback v6", ldapauth.Config{URL: "ldap://[::1]", UserTemplate: tmpl}, true},
		{"plain localhost", ldapauth.Config{URL: "ldap://localhost", UserTemplate: tmpl}, true},
		{"upn", ldapauth.Config{URL: "ldaps://dc.corp.example.com", UserTemplate: "{user}@corp.example.com"}, true},
		{"upn group", ldapauth.Config{URL: "ldaps://dc.corp.example.com", UserTemplate: "{user}@corp.example.com",
			BaseDN: "dc=corp,dc=example,dc=com", Group: "cn=KVM Admins,ou=Groups,dc=corp,dc=example,dc=com"}, true},
		{"down-level", ldapauth.Config{URL: "ldaps://dc.corp.example.com", UserTemplate: `CORP\{user}`}, true},
		{"dn group", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: tmpl, Group: "cn=kvm,dc=example,dc=org"}, true},
		{"timeout", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: tmpl, Timeout: time.Second}, true},

		{"plain network", ldapauth.Config{URL: "ldap://ldap.example.org", UserTemplate: tmpl}, false},
		{"plain network ip", ldapauth.Config{URL: "ldap://192.0.2.1", UserTemplate: tmpl}, false},
		{"plain localhost lookalike", ldapauth.Config{URL: "ldap://localhost.example.org", UserTemplate: tmpl}, false},
		{"ldaps starttls", ldapauth.Config{URL: "ldaps://ldap.example.org", StartTLS: true, UserTemplate: tmpl}, false},
		{"scheme", ldapauth.Config{URL: "https://ldap.example.org", UserTemplate: tmpl}, false},
		{"ldapi", ldapauth.Config{URL: "ldapi:///run/slapd/ldapi", UserTemplate: tmpl}, false},
		{"no url", ldapauth.Config{UserTemplate: tmpl}, false},
		{"no host", ldapauth.Config{URL: "ldaps://", UserTemplate: tmpl}, false},
		{"url dn", ldapauth.Config{URL: "ldaps://ldap.example.org/dc=example,dc=org", UserTemplate: tmpl}, false},
		{"url user", ldapauth.Config{URL: "ldaps://admin:pw@ldap.example.org", UserTemplate: tmpl}, false},
		{"url query", ldapauth.Config{URL: "ldaps://ldap.example.org?uid", UserTemplate: tmpl}, false},
		{"ca file missing", ldapauth.Config{URL: "ldaps://ldap.example.org", CAFile: filepath.Join(dir, "nope.pem"), UserTemplate: tmpl}, false},
		{"ca file not pem", ldapauth.Config{URL: "ldaps://ldap.example.org", CAFile: notPEM, UserTemplate: tmpl}, false},
		{"ca file and insecure", ldapauth.Config{URL: "ldaps://ldap.example.org", CAFile: ca, InsecureSkipVerify: true, UserTemplate: tmpl}, false},
		{"no template", ldapauth.Config{URL: "ldaps://ldap.example.org"}, false},
		{"template without user", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: "uid=admin,dc=example,dc=org"}, false},
		{"template user twice", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: "uid={user},cn={user},dc=example,dc=org"}, false},
		{"template bad dn", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: "uid={user},dc"}, false},
		{"upn group without base", ldapauth.Config{URL: "ldaps://dc.corp.example.com", UserTemplate: "{user}@corp.example.com",
			Group: "cn=KVM Admins,dc=corp,dc=example,dc=com"}, false},
		{"group not dn", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: tmpl, Group: "kvm-admins"}, false},
		{"base not dn", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: tmpl, BaseDN: "example.org"}, false},
		{"negative timeout", ldapauth.Config{URL: "ldaps://ldap.example.org", UserTemplate: tmpl, Timeout: -time.Second}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := ldapauth.New(tc.cfg)
			if tc.valid && err != nil {
				t.Fatalf("New: %v", err)
			}
			if !tc.valid && err == nil {
				t.Fatalf("New(%+v) = %v, want an error", tc.cfg, b)
			}
		})
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentServer returns the address of a listener that accepts
// connections and never writes to them, until the test ends.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

// writeCA writes a self-signed CA certificate to a file and returns its
// path, for configurations that need a CA file and never get as far as
// using it.
func writeCA(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "unused CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
