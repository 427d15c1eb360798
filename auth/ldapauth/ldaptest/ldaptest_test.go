package ldaptest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"
)

// TestStart checks the server the package promises: it takes each user's
// password over LDAPS and StartTLS, takes a bind with a DN and no password
// as anonymous (the behaviour clients must guard against), and shows
// nothing to anonymous clients.
func TestStart(t *testing.T) {
	s := Start(t)
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the CA file")
	}
	tlsConfig := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}
	dial := func(t *testing.T, url string, startTLS bool) *ldap.Conn {
		c, err := ldap.DialURL(url, ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}),
			ldap.DialWithTLSConfig(tlsConfig))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetTimeout(5 * time.Second)
		if startTLS {
			if err := c.StartTLS(tlsConfig); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	for _, u := range []User{Alice, Bob, Carol, Smith} {
		for _, startTLS := range []bool{false, true} {
			url := s.TLSURL
			if startTLS {
				url = s.URL
			}
			c := dial(t, url, startTLS)
			if err := c.Bind(u.DN, u.Password); err != nil {
				t.Errorf("%s: bind as %s: %v", url, u.DN, err)
			}
			if err := c.Bind(u.DN, u.Password+"x"); !ldap.IsErrorWithCode(err, ldap.LDAPResultInvalidCredentials) {
				t.Errorf("%s: bind as %s with a wrong password: %v, want invalid credentials", url, u.DN, err)
			}
		}
	}

	c := dial(t, s.TLSURL, false)
	if err := c.UnauthenticatedBind(Alice.DN); err != nil {
		t.Fatalf("bind as %s without a password: %v, want an anonymous success", Alice.DN, err)
	}
	who, err := c.WhoAmI(nil)
	if err != nil || who.AuthzID != "" {
		t.Errorf("WhoAmI after a bind without password = %+v, %v; want anonymous", who, err)
	}
	res, err := c.Search(ldap.NewSearchRequest(BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		0, 0, false, "(objectClass=*)", nil, nil))
	if err == nil && len(res.Entries) > 0 {
		t.Errorf("anonymous search found %d entries, want none", len(res.Entries))
	}

	if err := c.Bind(Alice.DN, Alice.Password); err != nil {
		t.Fatal(err)
	}
	who, err = c.WhoAmI(nil)
	if err != nil || who.AuthzID != "dn:"+Alice.DN {
		t.Errorf("WhoAmI as Alice = %+v, %v; want dn:%s", who, err, Alice.DN)
	}
	res, err = c.Search(ldap.NewSearchRequest(BaseDN, ldap.ScopeWholeSubtree, ldap.NeverDerefAliases,
		0, 0, false, "(userPrincipalName=CAROL@"+Domain+")", []string{"memberOf", "userPassword"}, nil))
	if err != nil || len(res.Entries) != 1 {
		t.Fatalf("search for Carol's UPN: %v, %v", res, err)
	}
	e := res.Entries[0]
	if e.DN != Carol.DN || e.GetAttributeValue("memberOf") != MemberOfGroup || e.GetAttributeValue("userPassword") != "" {
		t.Errorf("Carol's entry: %s memberOf=%q userPassword=%q", e.DN, e.GetAttributeValue("memberOf"), e.GetAttributeValue("userPassword"))
	}
}
