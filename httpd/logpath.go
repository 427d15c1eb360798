package httpd

import (
	"strings"

	"kvmd/auth"
)

// tokenMark stands in the log for a path segment that looks like a
// credential.
const tokenMark = "[token]"

// logPath is a request path as the logs show it: a segment that looks
// like a token (auth.LooksLikeToken: an API token's kvmd_ prefix, or a
// long run of hex digits) is replaced by [token]. A token pasted into a
// URL (curl $H/api/<token>, a 404) would otherwise be kept in the journal
// and in every support bundle made from it. The query string is never
// logged.
func logPath(p string) string {
	if !auth.LooksLikeToken(p) {
		return p // the common case: no allocation
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if auth.LooksLikeToken(s) {
			segs[i] = tokenMark
		}
	}
	return strings.Join(segs, "/")
}
