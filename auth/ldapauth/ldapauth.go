// Package ldapauth checks passwords against an LDAP directory (OpenLDAP,
// Active Directory) by binding as the user, for package auth's external
// backends.
//
// A Backend opens a new connection for every Verify and closes it before
// returning: logins are rare, and a fresh connection has no pooled state
// that a server restart, an idle timeout or a previous user's bind could
// leave behind. The connection is always encrypted: an ldaps:// URL, or an
// ldap:// URL with StartTLS, and the server's certificate is verified
// against the system roots or the PEM certificates of Config.CAFile unless
// Config.InsecureSkipVerify says otherwise. New refuses a plain ldap://
// URL without StartTLS because the simple bind sends the password as it
// is, except to a loopback address (127.0.0.0/8, ::1, localhost): there
// the password does not leave the machine, which allows a local proxy such
// as sssd or stunnel in front of the real directory.
//
// The bind name is Config.UserTemplate with {user} replaced. A template
// that is a DN (uid={user},ou=people,dc=example,dc=org) gets the user name
// escaped as a DN attribute value; any other template is sent as it is,
// an Active Directory user principal name ({user}@corp.example.com) or a
// down-level logon name (CORP\{user}), and then the user name may contain
// neither @ nor \. Empty passwords are rejected before anything is sent:
// many servers take a simple bind with a DN and no password as an
// anonymous bind and report success. So are user names with control
// characters, spaces at either end or invalid UTF-8. The directory
// compares names its own way, most often ignoring case: ALICE logs in as
// alice, and a caller that keys anything by the name given should fold
// its case.
//
// When Config.Group is set, the user must also be a direct member of that
// group, checked as the user after the bind: first the group entry
// (search base Group, scope base) is searched for member or uniqueMember
// equal to the user's DN (groupOfNames, groupOfUniqueNames, and AD's
// groups), then the user's own entry for memberOf equal to Group (AD, or
// OpenLDAP's memberof overlay). The server compares the DNs with its own
// matching rules. For a DN template the user's DN is the bind name. For
// any other template it is found with the "Who am I?" extended operation
// (RFC 4532): an answer "dn:..." is the DN; Active Directory answers
// "u:CORP\alice", and the DN is then that of the one entry under
// Config.BaseDN whose sAMAccountName is alice; without an answer, the one
// entry whose userPrincipalName is the bind name. Nested groups and AD's
// primary group (Domain Users) are not followed: name a group the users
// are direct members of.
//
// Wrong passwords, unknown users (both LDAP result 49, invalid
// credentials, which is also what AD's disabled, locked and expired
// accounts give) and users outside the group are backend.ErrRejected.
// Everything else, from a refused connection, a certificate that does not
// verify or the deadline to any other LDAP result, is
// backend.ErrUnavailable. The dial, the TLS handshake, the bind and the
// searches all end by the earlier of ctx's deadline and Config.Timeout:
// the deadline is set on the connection itself, so a server that accepts
// the connection and never answers cannot hold Verify past it.
package ldapauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-ldap/ldap/v3"

	"kvmd/auth/backend"
)

// DefaultTimeout bounds a Verify whose Config.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// maxUserLen bounds user names; no directory has longer ones, and a
// bind name is logged.
const maxUserLen = 256

// Config says which directory to ask and how.
type Config struct {
	// URL is ldaps://host[:port] or ldap://host[:port]; the default ports
	// are 636 and 389.
	URL string
	// StartTLS upgrades an ldap:// connection to TLS before the bind.
	StartTLS bool
	// CAFile is a PEM file of the certificates that sign the server's;
	// empty means the system roots. It is read once, by New.
	CAFile string
	// InsecureSkipVerify accepts any server certificate. The connection
	// is still encrypted, but anyone on the path can read the passwords.
	InsecureSkipVerify bool
	// UserTemplate is the bind name with {user} for the user name:
	// uid={user},ou=people,dc=example,dc=org or {user}@corp.example.com.
	UserTemplate string
	// BaseDN is where the user's entry is searched for when the template
	// is not a DN and Group is set.
	BaseDN string
	// Group, when set, is the DN of a group the user must be a member of.
	Group string
	// RoleGroups, when set, give users their role: the first group, in
	// order, the user is a direct member of (checked as Group is) gives
	// its role; a user in none of them is refused.
	RoleGroups []RoleGroup
	// Timeout bounds each Verify; zero means DefaultTimeout.
	Timeout time.Duration
}

// RoleGroup maps the members of an LDAP group to a role.
type RoleGroup struct {
	Role string // admin, operator or viewer
	DN   string
}

// ParseRoleGroups reads "admin=DN;operator=DN;viewer=DN" (any of them, in
// the order of precedence; DNs hold commas, hence the semicolons).
func ParseRoleGroups(s string) ([]RoleGroup, error) {
	var out []RoleGroup
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		role, dn, ok := strings.Cut(part, "=")
		role, dn = strings.TrimSpace(role), strings.TrimSpace(dn)
		switch {
		case !ok || dn == "":
			return nil, fmt.Errorf("ldap: role group %q is not ROLE=DN", part)
		case role != "admin" && role != "operator" && role != "viewer":
			return nil, fmt.Errorf("ldap: role group %q: the role is not admin, operator or viewer", part)
		}
		if _, err := ldap.ParseDN(dn); err != nil {
			return nil, fmt.Errorf("ldap: role group %q: %w", part, err)
		}
		out = append(out, RoleGroup{Role: role, DN: dn})
	}
	return out, nil
}

// A Backend checks passwords against one LDAP server. It is safe for
// concurrent use.
type Backend struct {
	url        string // for error messages
	addr       string // host:port
	ldaps      bool
	tls        *tls.Config
	template   string
	dnTemplate bool
	baseDN     string
	group      string
	roleGroups []RoleGroup
	timeout    time.Duration

	rolesMu sync.RWMutex
	roles   map[string]string // user -> the role its last accepted Verify found
}

var _ backend.Roler = (*Backend)(nil)

// Role returns the role the user's last accepted Verify found from
// RoleGroups; false without RoleGroups.
func (b *Backend) Role(user string) (string, bool) {
	b.rolesMu.RLock()
	defer b.rolesMu.RUnlock()
	r, ok := b.roles[user]
	return r, ok
}

var _ backend.Backend = (*Backend)(nil)

// New checks cfg and returns a Backend for it. It does not connect.
func New(cfg Config) (*Backend, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("ldap: url: %w", err)
	}
	if u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("ldap: url %q: want ldaps://host[:port] or ldap://host[:port]", cfg.URL)
	}
	b := &Backend{url: u.Scheme + "://" + u.Host, timeout: cfg.Timeout}
	host, port := u.Hostname(), u.Port()
	switch u.Scheme {
	case "ldaps":
		if cfg.StartTLS {
			return nil, fmt.Errorf("ldap: url %q: StartTLS is for ldap:// URLs; ldaps:// is TLS from the start", cfg.URL)
		}
		b.ldaps = true
		if port == "" {
			port = "636"
		}
	case "ldap":
		if !cfg.StartTLS && !isLoopback(host) {
			return nil, fmt.Errorf("ldap: url %q: passwords would cross the network in clear: use ldaps:// or StartTLS", cfg.URL)
		}
		if port == "" {
			port = "389"
		}
	default:
		return nil, fmt.Errorf("ldap: url %q: want scheme ldaps or ldap", cfg.URL)
	}
	b.addr = net.JoinHostPort(host, port)
	if b.ldaps || cfg.StartTLS {
		b.tls = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		switch {
		case cfg.InsecureSkipVerify && cfg.CAFile != "":
			return nil, errors.New("ldap: a CA file and skipping certificate verification contradict each other")
		case cfg.InsecureSkipVerify:
			b.tls.InsecureSkipVerify = true
		case cfg.CAFile != "":
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, fmt.Errorf("ldap: CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("ldap: CA file %s: no PEM certificate", cfg.CAFile)
			}
			b.tls.RootCAs = pool
		}
	}

	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("ldap: negative timeout %v", cfg.Timeout)
	}
	if b.timeout == 0 {
		b.timeout = DefaultTimeout
	}

	if strings.Count(cfg.UserTemplate, "{user}") != 1 {
		return nil, fmt.Errorf("ldap: user template %q: want {user} once", cfg.UserTemplate)
	}
	b.template = cfg.UserTemplate
	if strings.Contains(b.template, "=") {
		dn, err := ldap.ParseDN(strings.ReplaceAll(b.template, "{user}", "x"))
		if err != nil || len(dn.RDNs) == 0 {
			return nil, fmt.Errorf("ldap: user template %q: neither a DN nor a user principal name", cfg.UserTemplate)
		}
		b.dnTemplate = true
	}
	for _, dn := range []struct{ name, val string }{{"base DN", cfg.BaseDN}, {"group", cfg.Group}} {
		if dn.val == "" {
			continue
		}
		if d, err := ldap.ParseDN(dn.val); err != nil || len(d.RDNs) == 0 {
			return nil, fmt.Errorf("ldap: %s %q: not a DN", dn.name, dn.val)
		}
	}
	b.baseDN, b.group, b.roleGroups = cfg.BaseDN, cfg.Group, cfg.RoleGroups
	b.roles = map[string]string{}
	if (b.group != "" || len(b.roleGroups) > 0) && !b.dnTemplate && b.baseDN == "" {
		return nil, fmt.Errorf("ldap: user template %q is not a DN: the group check needs a base DN to find the user's entry under", cfg.UserTemplate)
	}
	return b, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Name returns "ldap".
func (b *Backend) Name() string { return "ldap" }

// Verify binds as user with passwd and, when a group is configured, checks
// that user is a member. See the package comment for the errors.
func (b *Backend) Verify(ctx context.Context, user, passwd string) error {
	if err := b.checkUser(user); err != nil {
		return fmt.Errorf("ldap: %w: %v", backend.ErrRejected, err)
	}
	if passwd == "" {
		return fmt.Errorf("ldap: %w: empty password", backend.ErrRejected)
	}
	bindName := b.bindName(user)

	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	conn, stop, err := b.dial(ctx)
	if err != nil {
		return unavailable(ctx, "connecting to "+b.url, err)
	}
	defer conn.Close()
	defer stop()

	if err := conn.Bind(bindName, passwd); err != nil {
		if ldap.IsErrorAnyOf(err, ldap.LDAPResultInvalidCredentials, ldap.LDAPResultInvalidDNSyntax) {
			return fmt.Errorf("ldap: bind as %q: %w: %w", bindName, backend.ErrRejected, err)
		}
		return unavailable(ctx, fmt.Sprintf("bind as %q", bindName), err)
	}
	if b.group != "" {
		if err := b.checkGroup(ctx, conn, user, bindName, b.group); err != nil {
			return err
		}
	}
	if len(b.roleGroups) == 0 {
		return nil
	}
	for _, rg := range b.roleGroups {
		err := b.checkGroup(ctx, conn, user, bindName, rg.DN)
		if errors.Is(err, backend.ErrRejected) {
			continue
		}
		if err != nil {
			return err
		}
		b.rolesMu.Lock()
		b.roles[user] = rg.Role
		b.rolesMu.Unlock()
		return nil
	}
	return fmt.Errorf("ldap: %w: %s is in none of the role groups", backend.ErrRejected, user)
}

// checkUser refuses the user names that no directory holds and that
// could make the bind name mean something else.
func (b *Backend) checkUser(user string) error {
	switch {
	case user == "":
		return errors.New("empty user name")
	case len(user) > maxUserLen:
		return errors.New("user name too long")
	case !utf8.ValidString(user):
		return errors.New("user name not UTF-8")
	case strings.IndexFunc(user, unicode.IsControl) >= 0:
		return errors.New("control character in user name")
	case strings.TrimSpace(user) != user:
		// The directory ignores them, so " alice" would log in as alice
		// under another name.
		return errors.New("space around user name")
	case !b.dnTemplate && strings.ContainsAny(user, `@\`):
		return fmt.Errorf("user name %q has @ or \\, which the template %q already sets", user, b.template)
	}
	return nil
}

func (b *Backend) bindName(user string) string {
	if b.dnTemplate {
		user = ldap.EscapeDN(user)
	}
	return strings.ReplaceAll(b.template, "{user}", user)
}

// dial connects, does the TLS handshake, and sets ctx's deadline on the
// connection so that every later read and write ends by then; stop
// releases the watch on ctx's cancellation.
func (b *Backend) dial(ctx context.Context) (conn *ldap.Conn, stop func() bool, err error) {
	deadline, _ := ctx.Deadline() // Verify always sets one
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", b.addr)
	if err != nil {
		return nil, nil, err
	}
	if err := raw.SetDeadline(deadline); err != nil {
		raw.Close()
		return nil, nil, err
	}
	// A cancellation before the deadline must end a blocked read too.
	stop = context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	var c net.Conn = raw
	if b.ldaps {
		tc := tls.Client(raw, b.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			stop()
			raw.Close()
			return nil, nil, fmt.Errorf("TLS handshake: %w", err)
		}
		c = tc
	}
	conn = ldap.NewConn(c, b.ldaps)
	conn.Start()
	// The library's own timeout, for each request and for Close, as a
	// second bound.
	conn.SetTimeout(time.Until(deadline))
	if b.tls != nil && !b.ldaps {
		if err := conn.StartTLS(b.tls); err != nil {
			stop()
			conn.Close()
			return nil, nil, fmt.Errorf("StartTLS: %w", err)
		}
	}
	return conn, stop, nil
}

// unavailable wraps err in backend.ErrUnavailable, and in ctx's error when
// the deadline or a cancellation is what ended the operation.
func unavailable(ctx context.Context, what string, err error) error {
	ctxErr := ctx.Err()
	if deadline, ok := ctx.Deadline(); ok && ctxErr == nil && !time.Now().Before(deadline) {
		// The connection's deadline, which is ctx's, beat ctx's timer.
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return fmt.Errorf("ldap: %s: %w: %w", what, backend.ErrUnavailable, err)
}

// directory is the part of *ldap.Conn the group check uses.
type directory interface {
	Search(*ldap.SearchRequest) (*ldap.SearchResult, error)
	WhoAmI([]ldap.Control) (*ldap.WhoAmIResult, error)
}

// checkGroup returns nil when the bound user is a direct member of
// group. See the package comment for how.
func (b *Backend) checkGroup(ctx context.Context, d directory, user, bindName, group string) error {
	userDN, err := b.userDN(ctx, d, bindName)
	if err != nil {
		return err
	}
	esc := ldap.EscapeFilter(userDN)
	res, err := d.Search(b.searchRequest(ctx, group, ldap.ScopeBaseObject,
		"(|(member="+esc+")(uniqueMember="+esc+"))"))
	groupMissing := ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject)
	switch {
	case err != nil && !groupMissing:
		return unavailable(ctx, "searching group "+group, err)
	case err == nil && len(res.Entries) > 0:
		return nil
	}
	res, err = d.Search(b.searchRequest(ctx, userDN, ldap.ScopeBaseObject,
		"(memberOf="+ldap.EscapeFilter(group)+")"))
	switch {
	case err != nil && !ldap.IsErrorWithCode(err, ldap.LDAPResultNoSuchObject):
		return unavailable(ctx, "searching "+userDN+"'s groups", err)
	case err == nil && len(res.Entries) > 0:
		return nil
	case groupMissing:
		return unavailable(ctx, "group "+group, errors.New("no such entry, or the user may not read it"))
	}
	return fmt.Errorf("ldap: %w: %s (%s) is not a member of %s", backend.ErrRejected, user, userDN, group)
}

// userDN returns the DN of the entry the connection is bound as.
func (b *Backend) userDN(ctx context.Context, d directory, bindName string) (string, error) {
	if b.dnTemplate {
		return bindName, nil
	}
	filter := "(userPrincipalName=" + ldap.EscapeFilter(bindName) + ")"
	who, err := d.WhoAmI(nil)
	switch {
	case err != nil && !isResult(err):
		return "", unavailable(ctx, "who am I", err)
	case err != nil:
		// Not supported: search by user principal name.
	case strings.HasPrefix(who.AuthzID, "dn:") && len(who.AuthzID) > len("dn:"):
		return who.AuthzID[len("dn:"):], nil
	case strings.HasPrefix(who.AuthzID, "u:"):
		// Active Directory: u:DOMAIN\sAMAccountName.
		name := who.AuthzID[len("u:"):]
		name = name[strings.LastIndexByte(name, '\\')+1:]
		if name != "" {
			filter = "(sAMAccountName=" + ldap.EscapeFilter(name) + ")"
		}
	}
	req := b.searchRequest(ctx, b.baseDN, ldap.ScopeWholeSubtree, filter)
	req.SizeLimit = 2
	res, err := d.Search(req)
	switch {
	case ldap.IsErrorWithCode(err, ldap.LDAPResultSizeLimitExceeded) || (err == nil && len(res.Entries) > 1):
		return "", unavailable(ctx, "finding "+bindName+"'s entry", fmt.Errorf("more than one entry under %s matches %s", b.baseDN, filter))
	case err != nil:
		return "", unavailable(ctx, "finding "+bindName+"'s entry", err)
	case len(res.Entries) == 0:
		return "", unavailable(ctx, "finding "+bindName+"'s entry", fmt.Errorf("no entry under %s matches %s", b.baseDN, filter))
	}
	return res.Entries[0].DN, nil
}

// searchRequest asks for no attributes (1.1, RFC 4511): only whether
// entries match, and their DNs.
func (b *Backend) searchRequest(ctx context.Context, base string, scope int, filter string) *ldap.SearchRequest {
	limit := 1
	if deadline, ok := ctx.Deadline(); ok {
		limit = max(1, int(math.Ceil(time.Until(deadline).Seconds())))
	}
	return ldap.NewSearchRequest(base, scope, ldap.NeverDerefAliases, 0, limit, false, filter, []string{"1.1"}, nil)
}

// isResult reports whether err is an LDAP result from the server, rather
// than a failure of the connection or the client.
func isResult(err error) bool {
	var le *ldap.Error
	return errors.As(err, &le) && le.ResultCode < ldap.ErrorNetwork
}
