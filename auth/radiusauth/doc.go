// Package radiusauth checks passwords against a RADIUS server (RFC 2865)
// for package auth: a Backend sends one PAP Access-Request per Verify and
// maps Access-Accept to success, Access-Reject to backend.ErrRejected, and
// everything else, silence included, to backend.ErrUnavailable.
//
// # The request
//
// The Access-Request carries Message-Authenticator (RFC 3579, HMAC-MD5 of
// the packet under the shared secret) as its first attribute, then
// User-Name, User-Password (hidden with the secret and the random Request
// Authenticator, RFC 2865 section 5.2) and NAS-Identifier. Sending
// Message-Authenticator in every Access-Request is the client side of
// the BlastRADIUS mitigation (CVE-2024-3596). FreeRADIUS 3.2.5 and later
// default to require_message_authenticator = auto, which starts requiring
// it from a client once that client has sent one; FreeRADIUS 3.2.1 in
// Debian 12 predates the fixes, defaults to no, and accepts the attribute
// either way; with yes (in any version) a request without a valid one is
// dropped silently. The package's tests run Debian's FreeRADIUS with yes,
// so every answer they get proves the attribute right, and a client with
// the wrong secret gets no answer at all (the server logs "invalid
// Message-Authenticator! (Shared secret is incorrect.)").
//
// # The response
//
// A response counts only when it carries the request's Identifier and a
// Response Authenticator made with the shared secret; when it carries a
// Message-Authenticator (FreeRADIUS adds one to every reply since 3.2.5),
// that must check out too. Anything else — a reply signed with another
// secret, a forged or garbled datagram — is ignored as if lost, so a
// forged datagram cannot decide a Verify. Responses without
// Message-Authenticator are accepted: servers before the BlastRADIUS
// fixes do not send one (Debian 12's FreeRADIUS 3.2.1 answers with bare
// 20-byte packets).
//
// Access-Challenge (used for one-time-password prompts) is not supported
// and gives backend.ErrUnavailable.
//
// # Time
//
// Verify returns by the earlier of ctx's deadline and Config.Timeout
// from its start. That budget is split into Retries+1 equal slots: the
// request goes out at the start of each slot, the same datagram each
// time (same Identifier and Request Authenticator, so that a server
// answering a retransmission from its duplicate cache is still
// understood), and an answer to any of the copies ends the wait. A
// refused port (an ICMP port-unreachable on the connected socket) ends
// it at once with backend.ErrUnavailable rather than waiting out the
// budget: the server is not running, and the user learns it at once.
package radiusauth
