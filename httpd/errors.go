package httpd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Error is an error with an HTTP answer: Status and Name go to the client
// with Msg; Err, the cause, goes only to the log.
type Error struct {
	Status int
	Name   string
	Msg    string
	Err    error
	// RetryAfter, when set, is sent as Retry-After in whole seconds.
	RetryAfter time.Duration
	// Allow, when set, is sent as the Allow header (405).
	Allow string
	// Expected marks a 5xx that is a known state of the device, not a
	// fault: a subsystem this build does not have, a slot taken, a file
	// that cannot be written here. It is logged at info, at a bounded
	// rate, as the 4xx are; a fault is logged as an error each time.
	Expected bool
	// logged says the cause was logged where it arose, at a bounded rate:
	// a flood of such failures must not give a log line each.
	logged bool
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Name, e.Msg, e.Err)
	}
	return e.Name + ": " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// BadParam is a 400 ValidatorError about the named parameter. The message
// never carries the value: it may be a password or a token.
func BadParam(param, why string) *Error {
	return &Error{Status: http.StatusBadRequest, Name: "ValidatorError", Msg: fmt.Sprintf("Invalid %s: %s", param, why)}
}

// BadRequest is a 400 for a request that is malformed as a whole.
func BadRequest(msg string, cause error) *Error {
	return &Error{Status: http.StatusBadRequest, Name: "BadRequestError", Msg: msg, Err: cause}
}

// Unavailable is a 503: something the request needs cannot be had now,
// because of a fault (logged as an error).
func Unavailable(msg string, cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError", Msg: msg, Err: cause}
}

// NotNow is a 503 for a known state, not a fault: something the request
// needs is taken, or not there on this device (logged at info, at a
// bounded rate).
func NotNow(msg string, cause error) *Error {
	e := Unavailable(msg, cause)
	e.Expected = true
	return e
}

var (
	errUnauthorized = &Error{Status: http.StatusUnauthorized, Name: "UnauthorizedError", Msg: "Authentication required: send X-KVMD-User/X-KVMD-Passwd, an auth_token cookie from /api/auth/login, or Basic credentials"}
	errForbidden    = &Error{Status: http.StatusForbidden, Name: "ForbiddenError", Msg: "Wrong user, password, 2FA code or session"}
	errNotFound     = &Error{Status: http.StatusNotFound, Name: "NotFoundError", Msg: "No such API endpoint"}
	errTooLarge     = &Error{Status: http.StatusRequestEntityTooLarge, Name: "RequestTooLargeError", Msg: "Request body is too large"}
)

func methodNotAllowed(allow string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Name: "MethodNotAllowedError", Msg: "Method not allowed here; allowed: " + allow, Allow: allow}
}

func tooManyRequests(wait time.Duration) *Error {
	secs := int64((wait + time.Second - 1) / time.Second)
	return &Error{
		Status: http.StatusTooManyRequests, Name: "TooManyRequestsError",
		Msg:        fmt.Sprintf("Too many failed attempts from this address; retry in %d s", secs),
		RetryAfter: time.Duration(secs) * time.Second,
	}
}

func internalError(cause error) *Error {
	return &Error{Status: http.StatusInternalServerError, Name: "InternalError", Msg: "Internal error; the daemon's log has the details", Err: cause}
}

// PublicError is an error of another package that says how to answer
// with it, in the manner of tailscale's tsweb.HTTPError: an HTTP status
// (4xx or 5xx) and the sentence the client sees. The error itself is the
// internal cause, logged and never sent.
type PublicError interface {
	error
	HTTPStatus() int
	PublicMessage() string
}

// publicNames are the envelope's error names of the statuses a
// PublicError may give.
var publicNames = map[int]string{
	http.StatusBadRequest:         "BadRequestError",
	http.StatusForbidden:          "ForbiddenError",
	http.StatusNotFound:           "NotFoundError",
	http.StatusServiceUnavailable: "UnavailableError",
}

// asError turns any error into an *Error: unknown ones are internal errors.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return errTooLarge
	}
	var pe PublicError
	if errors.As(err, &pe) {
		if name, ok := publicNames[pe.HTTPStatus()]; ok {
			// A 503 of another package says "not now, the request was
			// fine" (the journal cannot be read, its followers are many):
			// a known state, with its reason in the message.
			return &Error{Status: pe.HTTPStatus(), Name: name, Msg: pe.PublicMessage(), Err: err,
				Expected: pe.HTTPStatus() == http.StatusServiceUnavailable}
		}
	}
	return internalError(err)
}

type envelope struct {
	OK     bool `json:"ok"`
	Result any  `json:"result"`
}

type errorResult struct {
	Error    string `json:"error"`
	ErrorMsg string `json:"error_msg"`
}

// okEmpty is the reply of endpoints that answer with no result.
var okEmpty = []byte(`{"ok":true,"result":{}}`)

func errorBody(e *Error) []byte {
	b, _ := json.Marshal(envelope{Result: errorResult{Error: e.Name, ErrorMsg: e.Msg}})
	return b
}

// WriteJSON writes result in the envelope with status 200.
func WriteJSON(w http.ResponseWriter, result any) error {
	b, err := json.Marshal(envelope{OK: true, Result: result})
	if err != nil {
		return internalError(fmt.Errorf("encoding reply: %w", err))
	}
	writeBody(w, http.StatusOK, b)
	return nil
}

// writeResult writes result, JSON made elsewhere (package info keeps its
// categories as ready JSON), in the envelope with status 200.
func writeResult(w http.ResponseWriter, result []byte) {
	// Written in three parts, result as it is: its bytes may be shared
	// (InfoSource), and net/http buffers the writes anyway.
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = contentLength(len(resultHead) + len(result) + len(resultTail))
	w.WriteHeader(http.StatusOK)
	w.Write(resultHead)
	w.Write(result)
	w.Write(resultTail)
}

var resultHead, resultTail = []byte(`{"ok":true,"result":`), []byte(`}`)

// lengths holds the Content-Length values made last, one per residue of
// the length: /api/info's replies, asked again and again, are a few
// lengths, which then cost no allocation.
var lengths [64]atomic.Pointer[lengthValue]

type lengthValue struct {
	n int
	v []string
}

// contentLength returns n as a Content-Length header value, shared with
// other replies of that length (net/http copies header values before it
// writes them).
func contentLength(n int) []string {
	slot := &lengths[n%len(lengths)]
	if l := slot.Load(); l != nil && l.n == n {
		return l.v
	}
	l := &lengthValue{n: n, v: []string{strconv.Itoa(n)}}
	slot.Store(l)
	return l.v
}

// jsonType is every JSON reply's Content-Type, a value shared by the
// replies: net/http copies header values before it writes them (as
// securityHeaders).
var jsonType = []string{"application/json"}

func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonType
	h["Content-Length"] = contentLength(len(body))
	w.WriteHeader(status)
	w.Write(body)
}

func writeError(w http.ResponseWriter, e *Error) {
	h := w.Header()
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(int64(e.RetryAfter/time.Second), 10))
	}
	if e.Allow != "" {
		h.Set("Allow", e.Allow)
	}
	if e.Status == http.StatusRequestEntityTooLarge {
		// Without these net/http drains up to 256 KiB of the refused body,
		// with no deadline, before the reply leaves and again after.
		h.Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
	writeBody(w, e.Status, errorBody(e))
}
