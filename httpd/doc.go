// Package httpd is kvmd's HTTP server: one handler with its own routes under
// /api/ (also answered with /api stripped, as PiKVM's nginx forwards them),
// every one a row of one table with its least role and the credentials it
// takes (routeTable in routes.go), one wrapper that every request passes through (security headers, body
// limit, authentication, access log, panic recovery), and one place that
// renders replies in kvmd's JSON envelope:
//
//	{"ok": true, "result": {...}}
//	{"ok": false, "result": {"error": "ForbiddenError", "error_msg": "..."}}
//
// Handlers return an error; an *Error carries the status, the error name
// and the sentence the client sees, and wraps the internal cause, which is
// logged and never sent. The log (/api/log) and the Prometheus exposition
// (/api/export/prometheus/metrics) answer plain text, their errors JSON.
package httpd
