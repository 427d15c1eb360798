// Package auth decides who a request is. Its Store is the one reader and
// writer of the users file (an htpasswd file of user:hash lines) and the
// roles and API tokens files beside it, for the daemon and the commands
// alike: it follows them as they change, publishes what they hold as an
// immutable Snapshot that requests read without touching a file, and makes
// every change under one lock, a change of several files through a
// pending file, so that no crash leaves half of one. Passwords are
// checked against the hashes an existing PiKVM install may hold, and new
// ones written as bcrypt. It keeps login sessions in memory, ends them
// (and API tokens' requests) by timers at their deadlines, checks the TOTP
// code that ends every password when 2FA is on, and slows down password
// guessing per client address without locking the account for everyone.
// With an External, the passwords of every user but a few local ones go to
// an LDAP directory, a RADIUS server or an HTTP service instead (package
// backend and its implementations), under the same 2FA, sessions, limiter
// and log, with successes cached briefly and every check bounded in time
// and in number.
// It counts every decision by method and result (Authenticator.Counts),
// for the Prometheus export.
package auth
