package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"kvmd/auth/backend"
	"kvmd/auth/httpauth"
	"kvmd/auth/ldapauth"
	"kvmd/auth/radiusauth"
)

// newBackend returns the password checker --auth-backend names, or nil
// for the users file.
func newBackend(cfg Config) (backend.Backend, error) {
	switch cfg.AuthBackend {
	case "file":
		return nil, nil
	case "http":
		b, err := httpauth.New(httpauth.Config{
			URL: cfg.HTTPAuthURL, SecretFile: cfg.HTTPAuthSecretFile, CAFile: cfg.HTTPAuthCAFile, Timeout: cfg.AuthTimeout,
		})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return externalBackend(cfg)
}

// externalBackend returns the LDAP or RADIUS backend.
func externalBackend(cfg Config) (backend.Backend, error) {
	switch cfg.AuthBackend {
	case "ldap":
		roleGroups, err := ldapauth.ParseRoleGroups(cfg.LDAPRoleGroups)
		if err != nil {
			return nil, err
		}
		b, err := ldapauth.New(ldapauth.Config{
			URL: cfg.LDAPURL, StartTLS: cfg.LDAPStartTLS, CAFile: cfg.LDAPCAFile,
			InsecureSkipVerify: cfg.LDAPInsecureSkipVerify, UserTemplate: cfg.LDAPUserTemplate,
			BaseDN: cfg.LDAPBaseDN, Group: cfg.LDAPGroup, RoleGroups: roleGroups, Timeout: cfg.AuthTimeout,
		})
		if err != nil {
			return nil, err
		}
		return b, nil
	case "radius":
		secret, err := readSecret(cfg.RADIUSSecretFile)
		if err != nil {
			return nil, fmt.Errorf("radius: %w", err)
		}
		b, err := radiusauth.New(radiusauth.Config{
			Server: cfg.RADIUSServer, Secret: secret, Timeout: cfg.AuthTimeout,
			Retries: cfg.RADIUSRetries, NASIdentifier: cfg.RADIUSNASID, FilterIDRoles: cfg.RADIUSFilterIDRoles,
		})
		if err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("--auth-backend %q: not built in", cfg.AuthBackend)
}

// readSecret reads a shared secret file: its bytes but for the line end
// an editor adds (the secret itself may hold any other byte, blanks too).
func readSecret(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the secret: %w", err)
	}
	b = bytes.TrimRight(b, "\r\n")
	if len(b) == 0 {
		return nil, errors.New("the secret file " + path + " is empty")
	}
	return b, nil
}
