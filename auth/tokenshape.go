package auth

import "strings"

// minHexRun is the shortest run of hex digits LooksLikeToken takes for a
// credential: a session token is 64, an API token TokenPrefix and 64.
// Half of that also catches a token cut short or mistyped; after the
// prefix, minPrefixedRun digits do (kvmd_cpu_temperature is a metric).
const (
	minHexRun      = 32
	minPrefixedRun = 8
)

// LooksLikeToken reports whether s holds something shaped like a session
// or API token: TokenPrefix followed by 8 hex digits or more, or a run of
// at least 32 hex digits. Logs use it to keep a token that was pasted
// where it does not belong (a URL's path, the user field) out of the
// journal: neither a path of the API nor a user name holds such a run.
func LooksLikeToken(s string) bool {
	run, prefixed := 0, false
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			run = 0
			continue
		}
		if run == 0 {
			prefixed = strings.HasSuffix(s[:i], TokenPrefix)
		}
		if run++; run >= minHexRun || prefixed && run >= minPrefixedRun {
			return true
		}
	}
	return false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// LogName is a user name as the log shows it: "[token]" when it looks
// like a token (someone put their token in the user field).
func LogName(user string) string {
	if LooksLikeToken(user) {
		return "[token]"
	}
	return user
}
