package ldapauth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-ldap/ldap/v3"

	"kvmd/auth/backend"
	"kvmd/auth/ldapauth/ldaptest"
)

// adWhoAmI is a connection to slapd that answers "Who am I?" as Active
// Directory would, or fails it as a server without the operation does.
// OpenLDAP binds only by DN, so the AD path (a bind by user principal
// name, then the user's entry found under the base DN) is tested with the
// DN bind done and the answer replaced.
type adWhoAmI struct {
	*ldap.Conn
	authzID string
	err     error
}

func (c adWhoAmI) WhoAmI([]ldap.Control) (*ldap.WhoAmIResult, error) {
	return &ldap.WhoAmIResult{AuthzID: c.authzID}, c.err
}

func TestCheckGroupAD(t *testing.T) {
	s := ldaptest.Start(t)
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	bind := func(t *testing.T, u ldaptest.User) *ldap.Conn {
		c, err := ldap.DialURL(s.TLSURL, ldap.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}),
			ldap.DialWithTLSConfig(&tls.Config{RootCAs: roots, ServerName: "127.0.0.1"}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetTimeout(5 * time.Second)
		if err := c.Bind(u.DN, u.Password); err != nil {
			t.Fatal(err)
		}
		return c
	}
	unsupported := &ldap.Error{ResultCode: ldap.LDAPResultProtocolError, Err: errors.New("unsupported extended operation")}
	network := &ldap.Error{ResultCode: ldap.ErrorNetwork, Err: errors.New("connection reset")}
	alice, bob, carol := ldaptest.Alice, ldaptest.Bob, ldaptest.Carol
	for _, tc := range []struct {
		name     string
		template string
		group    string
		user     ldaptest.User
		who      *adWhoAmI // nil: slapd's own answer, dn:...
		want     error
	}{
		{"openldap dn", "{user}@" + ldaptest.Domain, ldaptest.Group, alice, nil, nil},
		{"openldap dn not member", "{user}@" + ldaptest.Domain, ldaptest.Group, bob, nil, backend.ErrRejected},
		{"ad u:", "{user}@" + ldaptest.Domain, ldaptest.Group, alice, &adWhoAmI{authzID: `u:EXAMPLE\alice`}, nil},
		{"ad u: down-level template", `EXAMPLE\{user}`, ldaptest.Group, alice, &adWhoAmI{authzID: `u:EXAMPLE\alice`}, nil},
		{"ad u: not member", "{user}@" + ldaptest.Domain, ldaptest.Group, bob, &adWhoAmI{authzID: `u:EXAMPLE\bob`}, backend.ErrRejected},
		{"ad u: memberOf", "{user}@" + ldaptest.Domain, ldaptest.MemberOfGroup, carol, &adWhoAmI{authzID: `u:EXAMPLE\carol`}, nil},
		{"ad u: uniqueMember", "{user}@" + ldaptest.Domain, ldaptest.UniqueGroup, bob, &adWhoAmI{authzID: `u:EXAMPLE\bob`}, nil},
		{"ad u: no such account", "{user}@" + ldaptest.Domain, ldaptest.Group, alice, &adWhoAmI{authzID: `u:EXAMPLE\al*`}, backend.ErrUnavailable},
		{"no who am I: upn", "{user}@" + ldaptest.Domain, ldaptest.Group, alice, &adWhoAmI{err: unsupported}, nil},
		{"empty who am I: upn", "{user}@" + ldaptest.Domain, ldaptest.Group, alice, &adWhoAmI{}, nil},
		{"upn not member", "{user}@" + ldaptest.Domain, ldaptest.Group, bob, &adWhoAmI{err: unsupported}, backend.ErrRejected},
		{"upn unknown", "{user}@corp.example.com", ldaptest.Group, alice, &adWhoAmI{err: unsupported}, backend.ErrUnavailable},
		{"who am I network error", "{user}@" + ldaptest.Domain, ldaptest.Group, alice, &adWhoAmI{err: network}, backend.ErrUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := New(Config{URL: s.TLSURL, CAFile: s.CAFile, UserTemplate: tc.template,
				BaseDN: ldaptest.BaseDN, Group: tc.group})
			if err != nil {
				t.Fatal(err)
			}
			if b.dnTemplate {
				t.Fatalf("template %q taken for a DN", tc.template)
			}
			var d directory = bind(t, tc.user)
			if tc.who != nil {
				tc.who.Conn = d.(*ldap.Conn)
				d = tc.who
			}
			err = b.checkGroup(t.Context(), d, tc.user.Name, b.bindName(tc.user.Name), b.group)
			if tc.want == nil && err != nil || !errors.Is(err, tc.want) {
				t.Fatalf("checkGroup: %v, want %v", err, tc.want)
			}
			if err != nil {
				t.Log(err)
			}
		})
	}
}

// FuzzBindName checks that a user name that passes checkUser stays one
// attribute value of the DN template: the bind DN has the template's
// RDNs, and its first value is the user name.
func FuzzBindName(f *testing.F) {
	for _, s := range []string{"alice", "smith, john", "a,b", "*", `a\,b+c=d;<"x">#`, "#x", "x ", " x", "é", "a\x00"} {
		f.Add(s)
	}
	b, err := New(Config{URL: "ldaps://ldap.example.org", UserTemplate: ldaptest.UserTemplate})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, user string) {
		if b.checkUser(user) != nil {
			return
		}
		name := b.bindName(user)
		dn, err := ldap.ParseDN(name)
		if err != nil {
			t.Fatalf("user %q: bind DN %q: %v", user, name, err)
		}
		if len(dn.RDNs) != 4 || len(dn.RDNs[0].Attributes) != 1 {
			t.Fatalf("user %q: bind DN %q has RDNs %v", user, name, dn.RDNs)
		}
		if a := dn.RDNs[0].Attributes[0]; a.Type != "uid" || a.Value != user {
			t.Fatalf("user %q: bind DN %q starts with %s=%q", user, name, a.Type, a.Value)
		}
		if got := dn.RDNs[1].String(); !strings.EqualFold(got, "ou=people") {
			t.Fatalf("user %q: bind DN %q: second RDN %s", user, name, got)
		}
	})
}
