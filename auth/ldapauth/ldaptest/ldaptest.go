// Package ldaptest runs a real OpenLDAP server (Debian's slapd) on
// loopback for tests of LDAP authentication: LDAPS and StartTLS with a
// certificate from a CA made for the test, a few users, and groups of
// each kind the group check reads.
//
// Start makes everything in a temporary directory: the CA and the server
// certificate for 127.0.0.1 and localhost, a slapd.conf (the mdb backend,
// suffix dc=example,dc=org), a small schema with Active Directory's
// userPrincipalName, sAMAccountName and memberOf, and the entries, loaded
// with slapadd before slapd starts. slapd runs in its own process group,
// which the test's cleanup kills.
//
// The server is set up the way the dangerous servers are: it accepts a
// simple bind with a DN and no password as an anonymous bind (allow
// bind_anon_dn), so a client that sends one is caught. Anonymous clients
// may bind and authenticate, nothing more; bound users read everything
// but passwords.
package ldaptest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"kvmd/internal/procgroup"
	"kvmd/internal/testutil"
)

// The directory's names.
const (
	BaseDN = "dc=example,dc=org"
	// UserTemplate binds as an entry under ou=people.
	UserTemplate = "uid={user},ou=people," + BaseDN
	// Group is a groupOfNames whose member values are Alice's and
	// Smith's DNs.
	Group = "cn=kvm-admins,ou=groups," + BaseDN
	// UniqueGroup is a groupOfUniqueNames whose uniqueMember is Bob's DN.
	UniqueGroup = "cn=kvm-operators,ou=groups," + BaseDN
	// MemberOfGroup lists none of the users as member, but Carol's entry
	// has it in memberOf, as Active Directory (or OpenLDAP's memberof
	// overlay) keeps it.
	MemberOfGroup = "cn=kvm-viewers,ou=groups," + BaseDN
	// Domain is the users' userPrincipalName suffix, and AD's NetBIOS
	// domain name is "EXAMPLE".
	Domain = "example.org"
)

// A User is an entry under ou=people with a password.
type User struct {
	Name     string // uid, and sAMAccountName
	Password string
	DN       string
}

// The users.
var (
	Alice = User{"alice", "alice-secret", "uid=alice,ou=people," + BaseDN}
	Bob   = User{"bob", "bob-secret", "uid=bob,ou=people," + BaseDN}
	Carol = User{"carol", "carol-secret", "uid=carol,ou=people," + BaseDN}
	// Smith's name needs escaping in a DN.
	Smith = User{"smith, john", "john-secret", `uid=smith\, john,ou=people,` + BaseDN}
)

// RootDN is the directory's administrator, whose password is
// rootPassword: the tests change entries as it (SetPassword, Modify).
const RootDN = "cn=admin," + BaseDN

const rootPassword = "kvmd-test-root"

// A Server is a running slapd.
type Server struct {
	// URL is ldap://127.0.0.1:port, which offers StartTLS.
	URL string
	// TLSURL is ldaps://127.0.0.1:port.
	TLSURL string
	// CAFile is the PEM certificate of the CA that signed the server's.
	CAFile string
}

// Find returns the paths of slapd and slapadd. When they are missing it
// skips the test, or fails it when testutil.Required, as make test has
// it.
func Find(t testing.TB) (slapd, slapadd string) {
	t.Helper()
	return testutil.NeedTool(t, "slapd", "slapd"), testutil.NeedTool(t, "slapd", "slapadd")
}

// Start runs a slapd for the test and stops it when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	slapd, slapadd := Find(t)
	dir := t.TempDir()
	s := &Server{CAFile: filepath.Join(dir, "ca.pem")}
	if err := writeCerts(dir, 1); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"ad.schema":  adSchema,
		"slapd.conf": strings.NewReplacer("DIR", dir, "ROOTPW", rootPassword).Replace(slapdConf),
		"seed.ldif":  seedLDIF(),
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(dir, "slapd.conf")
	if out, err := exec.Command(slapadd, "-q", "-f", conf, "-l", filepath.Join(dir, "seed.ldif")).CombinedOutput(); err != nil {
		t.Fatalf("slapadd: %v\n%s", err, out)
	}

	// The ports are free when picked, and may be taken by someone else
	// before slapd listens: try again then.
	var lastErr error
	for range 3 {
		ports, err := freePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		s.URL = "ldap://127.0.0.1:" + ports[0]
		s.TLSURL = "ldaps://127.0.0.1:" + ports[1]
		if lastErr = s.run(t, slapd, conf); lastErr == nil {
			return s
		}
	}
	t.Fatal(lastErr)
	return nil
}

// run starts slapd and waits until it answers on both URLs.
func (s *Server) run(t testing.TB, slapd, conf string) error {
	cmd := exec.Command(slapd, "-d", "0", "-h", s.URL+"/ "+s.TLSURL+"/", "-f", conf)
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting slapd: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		procgroup.Kill(cmd.Process)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			t.Errorf("slapd (pid %d) still running 5 s after SIGKILL", cmd.Process.Pid)
		}
	}

	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("slapd exited at start: %v\n%s", cmd.ProcessState, out.String())
		default:
		}
		err := s.ping()
		if err == nil {
			t.Cleanup(stop)
			return nil
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("slapd not answering after 10 s: %v\n%s", err, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ping asks both listeners who the anonymous client is, which also
// checks the server's certificate.
func (s *Server) ping() error {
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	for _, u := range []string{s.URL, s.TLSURL} {
		c, err := ldap.DialURL(u,
			ldap.DialWithDialer(&net.Dialer{Timeout: time.Second}),
			ldap.DialWithTLSConfig(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}))
		if err != nil {
			return err
		}
		c.SetTimeout(time.Second)
		_, err = c.WhoAmI(nil)
		c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Modify changes an entry as the directory's administrator would: the
// attribute's values replaced, or taken away when values is empty.
func (s *Server) Modify(t testing.TB, dn, attr string, values ...string) {
	t.Helper()
	c, err := ldap.DialURL(s.URL, ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetTimeout(5 * time.Second)
	if err := c.Bind(RootDN, rootPassword); err != nil {
		t.Fatalf("binding as %s: %v", RootDN, err)
	}
	m := ldap.NewModifyRequest(dn, nil)
	if len(values) == 0 {
		m.Delete(attr, nil)
	} else {
		m.Replace(attr, values)
	}
	if err := c.Modify(m); err != nil {
		t.Fatalf("modifying %s: %v", dn, err)
	}
}

// SetPassword gives u another password in the directory.
func (s *Server) SetPassword(t testing.TB, u User, passwd string) {
	t.Helper()
	s.Modify(t, u.DN, "userPassword", ssha(passwd))
}

func freePorts(n int) ([]string, error) {
	var ports []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}

// writeCerts writes ca.pem, server.pem and server.key to dir: a CA, and a
// certificate it signs for 127.0.0.1, ::1 and localhost.
func writeCerts(dir string, serial int64) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "ldaptest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial + 1),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	for name, block := range map[string]*pem.Block{
		"ca.pem":     {Type: "CERTIFICATE", Bytes: caDER},
		"server.pem": {Type: "CERTIFICATE", Bytes: der},
		"server.key": {Type: "PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(block), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// ssha is the {SSHA} userPassword value of password: SHA-1 of the
// password and a salt, then the salt, in base64.
func ssha(password string) string {
	salt := make([]byte, 8)
	rand.Read(salt)
	h := sha1.Sum(append([]byte(password), salt...))
	return "{SSHA}" + base64.StdEncoding.EncodeToString(append(h[:], salt...))
}

func seedLDIF() string {
	var b strings.Builder
	b.WriteString(`dn: dc=example,dc=org
objectClass: dcObject
objectClass: organization
o: Example
dc: example

dn: ou=people,dc=example,dc=org
objectClass: organizationalUnit
ou: people

dn: ou=groups,dc=example,dc=org
objectClass: organizationalUnit
ou: groups

`)
	memberOf := map[string]string{Alice.Name: Group, Smith.Name: Group, Carol.Name: MemberOfGroup}
	for _, u := range []User{Alice, Bob, Carol, Smith} {
		fmt.Fprintf(&b, "dn: %s\nobjectClass: inetOrgPerson\nobjectClass: kvmdTestADUser\nuid: %s\ncn: %s\nsn: %s\n",
			u.DN, u.Name, u.Name, u.Name)
		fmt.Fprintf(&b, "userPassword: %s\nuserPrincipalName: %s@%s\nsAMAccountName: %s\n",
			ssha(u.Password), u.Name, Domain, u.Name)
		if g := memberOf[u.Name]; g != "" {
			fmt.Fprintf(&b, "memberOf: %s\n", g)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "dn: %s\nobjectClass: groupOfNames\ncn: kvm-admins\nmember: %s\nmember: %s\n\n", Group, Alice.DN, Smith.DN)
	fmt.Fprintf(&b, "dn: %s\nobjectClass: groupOfUniqueNames\ncn: kvm-operators\nuniqueMember: %s\n\n", UniqueGroup, Bob.DN)
	// groupOfNames must have a member: the organization itself.
	fmt.Fprintf(&b, "dn: %s\nobjectClass: groupOfNames\ncn: kvm-viewers\nmember: %s\n\n", MemberOfGroup, BaseDN)
	return b.String()
}

// adSchema gives the test entries Active Directory's attributes, under
// their AD OIDs, with the equality rules AD matches them with; the object
// class is in OpenLDAP's experimental arc.
const adSchema = `attributetype ( 1.2.840.113556.1.4.656 NAME 'userPrincipalName'
	EQUALITY caseIgnoreMatch
	SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
attributetype ( 1.2.840.113556.1.4.221 NAME 'sAMAccountName'
	EQUALITY caseIgnoreMatch
	SYNTAX 1.3.6.1.4.1.1466.115.121.1.15 SINGLE-VALUE )
attributetype ( 1.2.840.113556.1.2.102 NAME 'memberOf'
	EQUALITY distinguishedNameMatch
	SYNTAX 1.3.6.1.4.1.1466.115.121.1.12 )
objectclass ( 1.3.6.1.4.1.4203.666.11.9999.1 NAME 'kvmdTestADUser' AUXILIARY
	MAY ( userPrincipalName $ sAMAccountName $ memberOf ) )
`

const slapdConf = `include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include DIR/ad.schema
pidfile DIR/slapd.pid
argsfile DIR/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
TLSCACertificateFile DIR/ca.pem
TLSCertificateFile DIR/server.pem
TLSCertificateKeyFile DIR/server.key
allow bind_anon_dn

database mdb
suffix "dc=example,dc=org"
rootdn "cn=admin,dc=example,dc=org"
rootpw ROOTPW
directory DIR/db
maxsize 16777216
index objectClass eq
index uid,userPrincipalName,sAMAccountName eq
access to attrs=userPassword
	by anonymous auth
	by * none
access to *
	by users read
	by * none
`

// syncBuffer collects slapd's output while the test may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
