package httpd

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// checkQuery refuses a query string that does not decode: a bad
// %-escape or a semicolon separator. net/http's Query drops such pairs
// silently, which would answer as if the parameter were absent. The
// values parsed are kept in q for the handler (query).
func checkQuery(r *http.Request, q *request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	v, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		// url.EscapeError is the bad %-escape; net/url has no type for
		// the semicolon, so the query itself says.
		var esc url.EscapeError
		switch {
		case errors.As(err, &esc):
			return BadParam("query", "malformed query string: a bad %-escape")
		case strings.Contains(r.URL.RawQuery, ";"):
			return BadParam("query", "malformed query string: a semicolon is no separator (use &)")
		}
		return BadParam("query", "malformed query string")
	}
	q.query = v
	return nil
}

// queryBool reads a boolean query parameter as kvmd does: 1/true/yes or
// 0/false/no in any case; absent gives def; anything else is a 400.
func queryBool(r *http.Request, name string, def bool) (bool, error) {
	v, ok := query(r)[name]
	if !ok || len(v) == 0 {
		return def, nil
	}
	switch strings.ToLower(strings.TrimSpace(v[0])) {
	case "1", "true", "yes":
		return true, nil
	case "0", "false", "no":
		return false, nil
	}
	return false, BadParam(name, "not a boolean (1/true/yes or 0/false/no)")
}
