package ldapauth_test

import (
	"errors"
	"testing"
	"time"

	"kvmd/auth/backend"
	"kvmd/auth/ldapauth"
	"kvmd/auth/ldapauth/ldaptest"
)

// TestRoleGroups: against the real slapd, LDAP groups give roles: the
// first group of the list the user is a member of (groupOfNames member,
// groupOfUniqueNames uniqueMember, or the user's memberOf), and a user in
// none of them is refused.
func TestRoleGroups(t *testing.T) {
	s := ldaptest.Start(t)
	groups, err := ldapauth.ParseRoleGroups("admin=" + ldaptest.Group + "; operator=" + ldaptest.UniqueGroup + ";viewer=" + ldaptest.MemberOfGroup)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ldapauth.New(ldapauth.Config{URL: s.TLSURL, CAFile: s.CAFile, UserTemplate: ldaptest.UserTemplate,
		Timeout: 5 * time.Second, RoleGroups: groups})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user ldaptest.User
		role string
	}{
		{ldaptest.Alice, "admin"}, {ldaptest.Smith, "admin"}, {ldaptest.Bob, "operator"}, {ldaptest.Carol, "viewer"},
	} {
		if err := b.Verify(t.Context(), tc.user.Name, tc.user.Password); err != nil {
			t.Errorf("%s: %v", tc.user.Name, err)
			continue
		}
		if got, ok := b.Role(tc.user.Name); !ok || got != tc.role {
			t.Errorf("%s: role %q %v, want %q", tc.user.Name, got, ok, tc.role)
		}
	}
	if err := b.Verify(t.Context(), ldaptest.Bob.Name, "wrong"); !errors.Is(err, backend.ErrRejected) {
		t.Errorf("wrong password: %v", err)
	}

	// Only the viewers' group: the others are in no role group.
	only, _ := ldapauth.ParseRoleGroups("viewer=" + ldaptest.MemberOfGroup)
	b, err = ldapauth.New(ldapauth.Config{URL: s.TLSURL, CAFile: s.CAFile, UserTemplate: ldaptest.UserTemplate,
		Timeout: 5 * time.Second, RoleGroups: only})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Verify(t.Context(), ldaptest.Alice.Name, ldaptest.Alice.Password); !errors.Is(err, backend.ErrRejected) {
		t.Errorf("alice in no role group: %v, want rejected", err)
	}
	if _, ok := b.Role(ldaptest.Alice.Name); ok {
		t.Errorf("alice got a role")
	}

	for _, bad := range []string{"root=" + ldaptest.Group, "admin", "admin=not a dn"} {
		if _, err := ldapauth.ParseRoleGroups(bad); err == nil {
			t.Errorf("ParseRoleGroups(%q) accepted", bad)
		}
	}
}
