package httpd

import (
	"net/http"
	"strings"
)

// queryBool reads a boolean query parameter as kvmd does: 1/true/yes or
// 0/false/no in any case; absent gives def; anything else is a 400.
func queryBool(r *http.Request, name string, def bool) (bool, error) {
	v, ok := r.URL.Query()[name]
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
