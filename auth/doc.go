// Package auth decides who a request is. It reads the users file (an
// htpasswd file of user:hash lines, re-read when it changes) and checks
// passwords against the hashes an existing PiKVM install may hold, writing
// new ones as bcrypt. It keeps login sessions in memory, checks the TOTP
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
