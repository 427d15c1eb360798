// Package firstboot provisions what kvmd needs on a new device: its
// configuration, a self-signed TLS certificate, an empty 2FA secret, a
// random key, and, while the users file has no user, an admin account with
// a generated password shown on the console's login banner. It creates
// only what is missing, so it runs at every boot (kvmd-firstboot.service).
package firstboot

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"

	"kvmd/auth"
	"kvmd/internal/atomicfile"
)

// Where a device keeps kvmd's files; kvmd-firstboot.service and
// kvmd.service use these defaults.
const (
	DefaultEtc   = "/etc/kvmd"
	DefaultState = "/var/lib/kvmd"
	DefaultIssue = "/etc/issue.d/kvmd.issue"
	// DefaultSocket is also in systemd/kvmd.socket.
	DefaultSocket = "/run/kvmd/kvmd.sock"
)

// The generated admin password: 16 characters of an alphabet without 0/O
// and 1/I, read off a screen and typed on a keyboard. 32 symbols, so that
// a random byte maps to one without bias; 80 bits.
const (
	passwdAlphabet = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
	passwdLen      = 16
)

// Config says where the files go. Empty fields take the defaults.
type Config struct {
	// Etc holds kvmd.yaml, htpasswd, totp.secret, tls.crt and tls.key.
	Etc string
	// State holds admin-password and secret.
	State string
	// Issue is the console login banner showing the generated password.
	Issue string
	// Hostname names the TLS certificate (default: this machine's).
	Hostname string
	// Group is the group the daemon runs as: given read access to the
	// secrets it reads, if it exists ("": none, they stay 0600 root).
	Group string
}

// firstboot holds the paths of a Run and what it reports.
type firstboot struct {
	etc, state, issue, hostname string
	// gid is the group given read access to the files the daemon reads
	// (-1: none, they stay 0600 root).
	gid    int
	stdout io.Writer
	did    bool
}

// Run provisions the device: it creates only what is missing, and prints
// each file it creates to stdout, warnings to stderr. Each step runs even
// when another fails; the errors are joined.
func Run(cfg Config, stdout, stderr io.Writer) error {
	fb := &firstboot{
		etc: orDefault(cfg.Etc, DefaultEtc), state: orDefault(cfg.State, DefaultState),
		issue: orDefault(cfg.Issue, DefaultIssue), hostname: cfg.Hostname, stdout: stdout, gid: -1,
	}
	if fb.hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("firstboot: %w", err)
		}
		fb.hostname = h
	}
	fb.hostname = strings.ToLower(fb.hostname)
	if cfg.Group != "" {
		g, err := user.LookupGroup(cfg.Group)
		if err != nil {
			fmt.Fprintf(stderr, "kvmd: firstboot: %v: the files the daemon reads stay readable by root only\n", err)
		} else {
			fb.gid, _ = strconv.Atoi(g.Gid)
		}
	}
	if err := os.MkdirAll(fb.etc, 0o755); err != nil {
		return fmt.Errorf("firstboot: %w", err)
	}
	if err := os.MkdirAll(fb.state, 0o700); err != nil {
		return fmt.Errorf("firstboot: %w", err)
	}
	err := errors.Join(
		fb.etcDir(),
		fb.repairState(),
		fb.msdDir(stderr),
		fb.secret(),
		fb.config(),
		fb.totp(),
		fb.tls(),
		fb.admin(stderr),
	)
	if !fb.did && err == nil {
		fmt.Fprintln(stdout, "firstboot: everything was in place; nothing changed")
	}
	if err != nil {
		return fmt.Errorf("firstboot: %w", err)
	}
	return nil
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func (fb *firstboot) etcPath(name string) string   { return filepath.Join(fb.etc, name) }
func (fb *firstboot) statePath(name string) string { return filepath.Join(fb.state, name) }

func (fb *firstboot) report(format string, a ...any) {
	fb.did = true
	fmt.Fprintf(fb.stdout, "created "+format+"\n", a...)
}

// errExists aborts a createFile whose file is already there.
var errExists = errors.New("exists")

// createFile writes the file at path with what data returns, atomically,
// unless it exists: nothing is ever overwritten. It holds atomicfile's lock,
// so a "kvmd user" editing the same directory waits.
func createFile(path string, perm fs.FileMode, data func() ([]byte, error)) (created bool, err error) {
	err = atomicfile.Update(path, perm, func(old []byte) ([]byte, error) {
		if old != nil {
			return nil, errExists
		}
		return data()
	})
	if errors.Is(err, errExists) {
		return false, nil
	}
	return err == nil, err
}

// shareWithDaemon makes a file the daemon reads, created 0600 by root,
// readable by the daemon's group: root:kvmd 0640. Later edits by atomicfile
// keep that.
func (fb *firstboot) shareWithDaemon(path string) error {
	if fb.gid < 0 {
		return nil
	}
	if err := os.Chown(path, -1, fb.gid); err != nil {
		return err
	}
	return os.Chmod(path, 0o640)
}

// etcDir gives ETC to the daemon's group, writable by it (root:kvmd
// 0775), at every run: the daemon edits the users file, its roles and
// tokens files and the 2FA secret from the web UI (kvmd.service has
// ReadWritePaths=/etc/kvmd), and atomicfile writes a new file beside the
// old one and renames it, which takes a directory it may write. A file it
// rewrites becomes kvmd:kvmd 0640. Without the group, ETC is left as it
// is. The daemon may then replace any file here (its own settings and TLS
// key too), but it could already make itself an admin: the users file is
// the secret that matters.
func (fb *firstboot) etcDir() error {
	if fb.gid < 0 {
		return nil
	}
	uid := -1 // only root gives a directory away
	if os.Geteuid() == 0 {
		uid = 0
	}
	return fb.ensureOwner(fb.etc, uid, fb.gid, 0o775)
}

// repairState gives STATE and the two files in it back to root alone, as
// they are made (0700 and 0600): the packaged kvmd.service once had
// StateDirectory=kvmd, and systemd gave the directory and everything in it
// to the daemon's user at every start. Only root can take them back. With
// the daemon's group, STATE is root:kvmd 0710: the daemon may pass through
// it to the image storage STATE/msd, but not list it, and its files stay
// root's alone.
func (fb *firstboot) repairState() error {
	if os.Geteuid() != 0 {
		return nil
	}
	gid, perm := 0, fs.FileMode(0o700)
	if fb.gid >= 0 {
		gid, perm = fb.gid, 0o710
	}
	errs := []error{fb.ensureOwner(fb.state, 0, gid, perm)}
	for _, name := range []string{"admin-password", "secret"} {
		path := fb.statePath(name)
		if ok, err := exists(path); err != nil || !ok {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, fb.ensureOwner(path, 0, 0, 0o600))
	}
	return errors.Join(errs...)
}

// msdDir makes STATE/msd, the virtual media's image storage (the daemon's
// default msd-dir), root:kvmd 0770: the daemon uploads, renames and
// removes images there (kvmd.service has ReadWritePaths= for it), and
// the images it writes are its own (kvmd:kvmd 0600, by its umask). An
// existing directory (a partition mounted there, as PiKVM has one) is
// given the same group and mode; where its file system cannot (vfat),
// that is a warning: mount it with the daemon's uid or gid instead.
func (fb *firstboot) msdDir(stderr io.Writer) error {
	if fb.gid < 0 || os.Geteuid() != 0 {
		return nil
	}
	dir := fb.statePath("msd")
	switch ok, err := exists(dir); {
	case err != nil:
		return err
	case !ok:
		if err := os.Mkdir(dir, 0o770); err != nil {
			return err
		}
		fb.report("%s", dir)
	}
	if err := fb.ensureOwner(dir, 0, fb.gid, 0o770); err != nil {
		fmt.Fprintf(stderr, "kvmd: firstboot: %v: the daemon may not be able to write the virtual media's images\n", err)
	}
	return nil
}

// ensureOwner sets path's owner (uid -1: keep it), group and mode where
// they differ, and says what it changed.
func (fb *firstboot) ensureOwner(path string, uid, gid int, perm fs.FileMode) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	did := false
	if (uid >= 0 && int(st.Uid) != uid) || int(st.Gid) != gid {
		if err := os.Chown(path, uid, gid); err != nil {
			return err
		}
		did = true
	}
	if fi.Mode().Perm() != perm {
		if err := os.Chmod(path, perm); err != nil {
			return err
		}
		did = true
	}
	if did {
		fb.did = true
		owner := "its owner"
		if uid >= 0 {
			owner = strconv.Itoa(uid)
		}
		fmt.Fprintf(fb.stdout, "changed %s to owner %s, group %d, mode %#o\n", path, owner, gid, perm)
	}
	return nil
}

func exists(path string) (bool, error) {
	_, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// secret creates STATE/secret: 32 random bytes, hex, for whatever needs a
// key that survives reboots.
func (fb *firstboot) secret() error {
	path := fb.statePath("secret")
	created, err := createFile(path, 0o600, func() ([]byte, error) {
		return []byte(hex.EncodeToString(randomBytes(32)) + "\n"), nil
	})
	if created {
		fb.report("%s (a random key)", path)
	}
	return err
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b) // never fails; crashes the program if the system's source does
	return b
}

// fileConfig is what firstboot writes to ETC/kvmd.yaml: the keys of kvmd
// serve's configuration it sets, in this order.
type fileConfig struct {
	Listen     []string `yaml:"listen"`
	Users      string   `yaml:"users"`
	TOTPSecret string   `yaml:"totp-secret"`
	TLSCert    string   `yaml:"tls-cert"`
	TLSKey     string   `yaml:"tls-key"`
}

// config creates ETC/kvmd.yaml.
func (fb *firstboot) config() error {
	path := fb.etcPath("kvmd.yaml")
	created, err := createFile(path, 0o644, func() ([]byte, error) {
		var b bytes.Buffer
		b.WriteString("# kvmd serve's settings: the keys are its flags (kvmd serve -h). Written by kvmd firstboot.\n" +
			"# Under systemd, kvmd.socket's sockets are used and listen is ignored.\n")
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		err := enc.Encode(fileConfig{
			// ":443" is IPv4 and IPv6, as kvmd.socket's ListenStream=443.
			Listen:     []string{":443", "unix:" + DefaultSocket},
			Users:      fb.etcPath("htpasswd"),
			TOTPSecret: fb.etcPath("totp.secret"),
			TLSCert:    fb.etcPath("tls.crt"),
			TLSKey:     fb.etcPath("tls.key"),
		})
		if err == nil {
			err = enc.Close()
		}
		return b.Bytes(), err
	})
	if created {
		fb.report("%s", path)
	}
	return err
}

// totp creates an empty ETC/totp.secret: 2FA off until "kvmd totp init".
// The file must exist, as the daemon refuses every login when the secret
// file it is configured with is missing.
func (fb *firstboot) totp() error {
	path := fb.etcPath("totp.secret")
	created, err := auth.TOTPFile{Path: path}.Create()
	if created {
		fb.report("%s (empty: 2FA off)", path)
		err = fb.shareWithDaemon(path)
	}
	return err
}

// tls creates a self-signed certificate and its key, unless both exist. A
// key without a certificate (a run cut short between the two) gets a
// certificate; a certificate without its key is an error, left alone.
func (fb *firstboot) tls() error {
	certPath, keyPath := fb.etcPath("tls.crt"), fb.etcPath("tls.key")
	haveCert, err := exists(certPath)
	if err != nil {
		return err
	}
	haveKey, err := exists(keyPath)
	if err != nil {
		return err
	}
	switch {
	case haveCert && haveKey:
		return nil
	case haveCert:
		return fmt.Errorf("%s exists without its key %s: left alone; remove it to have a new pair made", certPath, keyPath)
	}

	var key crypto.Signer
	if haveKey {
		data, err := os.ReadFile(keyPath)
		if err != nil {
			return err
		}
		if key, err = parseKey(data); err != nil {
			return fmt.Errorf("%s: %w", keyPath, err)
		}
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return err
		}
		created, err := createFile(keyPath, 0o600, func() ([]byte, error) {
			return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
		})
		if err != nil {
			return err
		}
		if !created {
			return fmt.Errorf("%s appeared while firstboot ran", keyPath)
		}
		fb.report("%s (ECDSA P-256)", keyPath)
		if err := fb.shareWithDaemon(keyPath); err != nil {
			return err
		}
		key = k
	}

	dns, ips := fb.names()
	der, err := selfSigned(key, fb.hostname, dns, ips, time.Now())
	if err != nil {
		return err
	}
	created, err := createFile(certPath, 0o644, func() ([]byte, error) {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
	})
	if created {
		names := slices.Clone(dns)
		for _, ip := range ips {
			names = append(names, ip.String())
		}
		fb.report("%s (self-signed, 10 years, for %s)", certPath, strings.Join(names, " "))
	}
	return err
}

// names returns the certificate's subject alternative names: the host name,
// its .local (mDNS) name, localhost, the loopback addresses and the
// machine's current addresses other than loopback and link-local ones.
func (fb *firstboot) names() (dns []string, ips []net.IP) {
	dns = []string{fb.hostname}
	if !strings.Contains(fb.hostname, ".") {
		dns = append(dns, fb.hostname+".local")
	}
	dns = append(dns, "localhost")
	slices.Sort(dns)
	dns = slices.Compact(dns)
	ips = []net.IP{net.IPv4(127, 0, 0, 1).To4(), net.IPv6loopback}
	// Without the addresses (no network yet) the names still work.
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.IsLinkLocalUnicast() || n.IP.IsUnspecified() {
			continue
		}
		ip := n.IP
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		if !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	}
	return dns, ips
}

// selfSigned makes a server certificate for key, signed by itself.
func selfSigned(key crypto.Signer, cn string, dns []string, ips []net.IP, now time.Time) ([]byte, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"kvmd"}},
		// An hour back: a client whose clock is a little behind still
		// accepts it.
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              dns,
		IPAddresses:           ips,
	}
	return x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
}

// parseKey reads a PEM private key: PKCS#8, or SEC 1 ("EC PRIVATE KEY").
func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM data")
	}
	var k any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("unsupported key type %T", k)
	}
	return s, nil
}

// admin sets up the admin account when the users file has no user: it
// stores a new password in STATE/admin-password (or takes the one stored
// there by a run that was cut short), writes the console banner showing
// it, and adds admin to the users file, in that order, so that a crash at
// any point is finished by the next run. Once the users file has users, it
// only takes down the banner of a generated password that was changed.
func (fb *firstboot) admin(stderr io.Writer) error {
	usersPath, pwPath := fb.etcPath("htpasswd"), fb.statePath("admin-password")
	usersExisted, err := exists(usersPath)
	if err != nil {
		return err
	}
	store, err := auth.OpenStore(usersPath, auth.StoreConfig{Warn: func(p string, err error) {
		fmt.Fprintf(stderr, "kvmd: warning: %s: %v\n", p, err)
	}})
	if err != nil {
		return err
	}
	var users []string
	if usersExisted {
		snap := store.Snapshot()
		if err := snap.Err(); err != nil {
			return err
		}
		users = snap.Users()
	}
	if len(users) > 0 {
		return fb.dropStaleBanner(usersPath, pwPath)
	}

	passwd, err := fb.adminPassword(pwPath)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(fb.issue), 0o755); err != nil {
		return fmt.Errorf("console banner: %w", err)
	}
	created, err := createFile(fb.issue, 0o600, func() ([]byte, error) {
		return []byte(fb.banner(passwd)), nil
	})
	if err != nil {
		return fmt.Errorf("console banner: %w", err)
	}
	if created {
		fb.report("%s (the console's login banner shows the admin password)", fb.issue)
	}

	hash, err := auth.NewHash(passwd)
	if err != nil {
		return err
	}
	added := false
	err = store.Edit(nil, func(e *auth.Edit) error {
		if len(e.Users.Users()) > 0 {
			return errExists // someone added a user meanwhile
		}
		added = true
		return e.AddUser("admin", hash, auth.RoleNone)
	})
	if errors.Is(err, errExists) {
		return nil
	}
	if err != nil {
		return err
	}
	if added {
		fb.report("%s (user admin; password in %s)", usersPath, pwPath)
	}
	if !usersExisted {
		return fb.shareWithDaemon(usersPath)
	}
	return nil
}

// adminPassword returns the password in STATE/admin-password, creating the
// file with a new one when it does not exist.
func (fb *firstboot) adminPassword(path string) (string, error) {
	created, err := createFile(path, 0o600, func() ([]byte, error) {
		return []byte(newPassword() + "\n"), nil
	})
	if err != nil {
		return "", err
	}
	if created {
		fb.report("%s (the generated admin password)", path)
	}
	return storedPassword(path)
}

// storedPassword reads STATE/admin-password.
func storedPassword(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	passwd := strings.TrimSpace(string(data))
	if passwd == "" || auth.ValidPasswd(passwd) != nil || strings.Contains(passwd, `\`) {
		return "", fmt.Errorf("%s holds no usable password; remove it to have a new one generated", path)
	}
	return passwd, nil
}

func newPassword() string {
	b := randomBytes(passwdLen)
	for i := range b {
		b[i] = passwdAlphabet[int(b[i])%len(passwdAlphabet)]
	}
	return string(b)
}

// banner is the console login banner for passwd. agetty shows the files of
// /etc/issue.d above its prompt and expands \4 to the machine's IPv4
// address and \n to its host name, current whenever the prompt is shown.
func (fb *firstboot) banner(passwd string) string {
	esc := func(s string) string { return strings.ReplaceAll(s, `\`, `\\`) }
	return "kvmd on \\n: https://\\4/\n" +
		"  Log in as admin, password " + passwd + "\n" +
		"  (generated at first boot, kept in " + esc(fb.statePath("admin-password")) + ").\n" +
		"  Change it as root: kvmd user set admin --users " + esc(fb.etcPath("htpasswd")) + "\n\n"
}

// dropStaleBanner removes the console banner once the generated password
// no longer opens the admin account: it would show a wrong password. Only a
// banner exactly as firstboot wrote it is removed.
func (fb *firstboot) dropStaleBanner(usersPath, pwPath string) error {
	shown, err := os.ReadFile(fb.issue)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	passwd, err := storedPassword(pwPath)
	if err != nil || string(shown) != fb.banner(passwd) {
		return nil
	}
	data, err := os.ReadFile(usersPath)
	if err != nil {
		return err
	}
	f, _ := auth.ParseHtpasswd(data)
	if hash, ok := f.Lookup("admin"); ok {
		if h, err := auth.ParseHash(hash); err == nil && h.Verify(passwd) {
			return nil
		}
	}
	if err := os.Remove(fb.issue); err != nil {
		return err
	}
	fb.did = true
	fmt.Fprintf(fb.stdout, "removed %s: the generated admin password was changed\n", fb.issue)
	return nil
}
