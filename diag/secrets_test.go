package diag

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"kvmd/internal/testutil"
	"kvmd/journal/journaltest"
)

// planted are the secrets of a device, put in every place they can live:
// their files, the journal (service and kernel), the configuration, the
// environment and a command line.
type planted struct {
	secrets Secrets
	// leaks are the strings that must not be anywhere in the bundle.
	leaks    []string
	settings string
}

func plant(t *testing.T) (*env, planted) {
	t.Helper()
	dir := t.TempDir()
	const passwd = "PlantedPassw0rd"
	// Real bcrypt hashes, as kvmd user writes them, at the least cost:
	// what matters is their form.
	h1, err := bcrypt.GenerateFromPassword([]byte(passwd), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := bcrypt.GenerateFromPassword([]byte("OperatorPassw0rd"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	hash, hash2 := string(h1), string(h2)
	const (
		totp    = "PLANTEDTOTPSECRETQWERTYUIOPASDFG"
		radius  = "planted-radius-shared"
		bearer  = "planted-http-backend-bearer"
		token   = "plantedsessiontoken0123456789abcdef"
		ldapPw  = "planted-ldap-bind-pw"
		envVal  = "planted-env-value"
		argVal  = "planted-cmdline-token"
		fileTok = "planted-secret-in-file"
	)
	// An API token and a session token as the daemon makes them
	// (auth.TokenPrefix and 64 hex digits; 64 hex digits).
	apiTok, apiTok2, sessTok := "kvmd_"+randHex(t), "kvmd_"+randHex(t), randHex(t)
	_, keyFile := testutil.WriteCertPEM(t, dir, testutil.SelfSigned(t))
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WriteFiles(t, dir, map[string]string{
		"htpasswd":          "admin:" + hash + "\noperator:" + hash2 + "\n",
		"totp.secret":       totp + "\n",
		"radius.secret":     radius + "\n",
		"http-auth.secret":  bearer + "\n",
		"ldap-bind.secret":  fileTok,
		"ignored-but-there": "x",
	})
	basic := base64.StdEncoding.EncodeToString([]byte("admin:" + passwd))
	var keyLines []string
	for l := range strings.SplitSeq(string(keyPEM), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			keyLines = append(keyLines, l)
		}
	}
	msgs := []string{
		"user file line admin:" + hash,
		"the 2FA secret is " + totp,
		"provisioning otpauth://totp/kvmd:admin?secret=" + totp + "&issuer=kvmd",
		"request headers: X-KVMD-User: admin, X-KVMD-Passwd: " + passwd,
		"Authorization: Basic " + basic,
		"backend call Authorization: Bearer " + bearer,
		"Cookie: auth_token=" + token,
		"GET /api/info?auth_token=" + token + " 200",
		`login form {"user":"admin","passwd":"` + passwd + `"}`,
		"radius: shared secret " + radius + " rejected by 10.0.0.5",
		"tls: loaded key\n" + string(keyPEM),
		"a quoted piece of the key: " + keyLines[1],
		"ldap: bind with ldaps://binder:" + ldapPw + "@ldap.example.org failed",
		"ldap: bind secret " + fileTok,
		"auth failed user=operator method=basic addr=192.168.1.77 reason=\"wrong user or password\"",
		// Tokens in their real form where no label says so: pasted into
		// a URL (a 404 in the access log of an older daemon, a proxy's
		// log), into the user field, as a query value.
		"http addr=192.168.1.77 method=GET path=/api/" + apiTok + " status=404",
		"http addr=192.168.1.77 method=GET path=/api/" + sessTok + " status=404",
		"nginx: \"GET /api/info?fields=hw&x=" + apiTok2 + "&s=" + sessTok + " HTTP/1.1\" 200",
		"auth failed user=" + apiTok + " method=xhdr addr=192.168.1.77 reason=\"wrong user or password\"",
		"auth failed user=" + strings.ToUpper(sessTok) + " method=xhdr",
	}
	e := newEnv(t, func() []journaltest.Entry {
		var es []journaltest.Entry
		for i, m := range msgs {
			es = append(es, journaltest.Entry{Time: time.Now().Add(-time.Duration(50-i) * time.Minute), Boot: thisBoot, Unit: "kvmd.service", Message: m})
		}
		es = append(es,
			journaltest.Entry{Time: time.Now().Add(-40 * time.Hour), Boot: prevBoot, Unit: "kvmd.service", Message: "previous boot: X-KVMD-Passwd: " + passwd + " token " + token},
			journaltest.Entry{Time: time.Now().Add(-time.Minute), Boot: thisBoot, Fields: map[string]string{"_TRANSPORT": "kernel"},
				Message: "audit: cmdline=kvmd --ldap-password=" + ldapPw + " secret " + totp})
		return es
	}()...)

	// A kvmd process in the tree's /proc with a secret on its command line.
	testutil.WriteFiles(t, e.root, map[string]string{
		"proc/4242/cmdline": "/usr/bin/kvmd\x00serve\x00--http-auth-token=" + argVal + "\x00--users\x00/etc/kvmd/htpasswd\x00",
	})
	t.Setenv("KVMD_TEST_SECRET", envVal)

	p := planted{
		secrets: Secrets{
			Users: filepath.Join(dir, "htpasswd"),
			Files: []string{filepath.Join(dir, "totp.secret"), keyFile, filepath.Join(dir, "radius.secret"),
				filepath.Join(dir, "http-auth.secret"), filepath.Join(dir, "ldap-bind.secret")},
			Names: []string{"admin"},
		},
		settings: "users: " + filepath.Join(dir, "htpasswd") + "\ntotp-secret: " + filepath.Join(dir, "totp.secret") +
			"\nldap-url: ldaps://binder:" + ldapPw + "@ldap.example.org\nhttp-auth-url: https://kvm:" + bearer + "@auth.example.org/check\n",
		leaks: []string{passwd, "OperatorPassw0rd", hash, hash2, totp, radius, bearer, token, ldapPw, envVal, argVal, fileTok, basic,
			apiTok[len("kvmd_"):], apiTok2[len("kvmd_"):], sessTok, strings.ToUpper(sessTok)},
	}
	p.leaks = append(p.leaks, keyLines...)
	return e, p
}

// randHex is 64 random hex digits, a token's secret part.
func randHex(t *testing.T) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func bundleOf(t *testing.T, e *env, p planted, secrets Secrets, identities bool) map[string]string {
	t.Helper()
	r, err := NewRedactor(secrets, identities, "raspberrypi")
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config(r)
	cfg.Settings = []byte(p.settings)
	var out bytes.Buffer
	if err := New(cfg).Write(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	_, files := unzip(t, out.Bytes())
	return files
}

// find returns where in the unpacked archive s is.
func find(files map[string]string, s string) []string {
	var where []string
	for name, data := range files {
		if strings.Contains(data, s) {
			where = append(where, name)
		}
	}
	return where
}

// TestPlantedSecrets searches the whole unpacked archive for every
// planted secret.
func TestPlantedSecrets(t *testing.T) {
	e, p := plant(t)

	// Without knowing where the secrets are, some get through: the test
	// sees a leak when there is one.
	files := bundleOf(t, e, p, Secrets{}, false)
	var seen int
	for _, s := range p.leaks {
		if len(find(files, s)) > 0 {
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("a bundle made without the secrets' files holds none of them: the planted secrets never reach the bundle, so this test proves nothing")
	}

	files = bundleOf(t, e, p, p.secrets, false)
	for _, s := range p.leaks {
		if where := find(files, s); len(where) > 0 {
			t.Errorf("secret %q is in %v", s, where)
		}
	}
	// What is not secret is still there: names and addresses matter for
	// diagnosis, paths say where the secrets are kept.
	for _, keep := range []string{"user=operator", "192.168.1.77", "X-KVMD-User: admin", "ldap.example.org", "/etc/kvmd/htpasswd",
		"totp-secret: /", "radius: shared secret [REDACTED] rejected", "raspberrypi"} {
		if len(find(files, keep)) == 0 {
			t.Errorf("%q is nowhere in the bundle; only secrets are to be removed", keep)
		}
	}
	if !strings.Contains(files["processes.txt"], "4242 /usr/bin/kvmd serve --http-auth-token=[REDACTED]") {
		t.Errorf("processes.txt:\n%s", files["processes.txt"])
	}
	if !strings.Contains(files["environment.txt"], "\nKVMD_TEST_SECRET\n") {
		t.Errorf("environment.txt lacks the variable's name")
	}
}

// TestRedactIdentities: with identities removed, no user name, address or
// host name is left either, and each has one placeholder throughout.
func TestRedactIdentities(t *testing.T) {
	e, p := plant(t)
	files := bundleOf(t, e, p, p.secrets, true)
	for _, s := range append(p.leaks, "admin", "operator", "192.168.1.77", "10.0.0.5", "raspberrypi") {
		if where := find(files, s); len(where) > 0 {
			t.Errorf("%q is in %v", s, where)
		}
	}
	if !strings.Contains(files["journal/this-boot.txt"], "auth failed user=user-2 method=basic addr=addr-") {
		t.Errorf("journal/this-boot.txt lacks the placeholders:\n%s", files["journal/this-boot.txt"])
	}
}
