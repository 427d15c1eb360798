// Package web holds the browser front end of kvmd: the login page, the
// dashboard and the log viewer, as static files embedded in the binary.
//
// The pages are plain HTML with JavaScript modules and one style sheet;
// there is no build step. They load nothing from other origins and use no
// inline scripts or styles, so they run under a strict Content-Security-Policy
// (script-src 'self', style-src 'self'). Everything they show comes from the
// daemon's own JSON API, fetched with the session cookie set at login.
//
// The server serves each page with one script, made when it starts from the
// page's module scripts and what they import (httpd's bundleUI): keep to
// named imports from files of the UI and exported declarations, the forms
// it understands (its test fails on any other).
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// FS returns the files of the web UI, named as served below /static/
// ("app.css", "login.html", ...).
func FS() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		// fs.Sub fails only for an invalid directory name, and "static" is valid.
		panic(err)
	}
	return sub
}
