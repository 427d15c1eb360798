package redfish

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Registry is the prefix of every message id: DMTF's Base message
// registry (Base.1.16.0), whose keys say what went wrong in a way every
// Redfish client reads; the messages themselves are this daemon's.
const Registry = "Base.1.16"

// Error is a Redfish error answer: its status, a Base message key (ID),
// its message and arguments, and the cause, for the log only.
type Error struct {
	Status     int
	ID         string
	Msg        string
	Args       []string
	Resolution string
	// RetryAfter, when set, is sent as Retry-After in whole seconds.
	RetryAfter time.Duration
	// Allow, when set, is sent as the Allow header (405).
	Allow string
	Err   error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("redfish: %s: %s: %v", e.ID, e.Msg, e.Err)
	}
	return "redfish: " + e.ID + ": " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// errorBody is DSP0266's error response: an error object with a code, a
// message, and @Message.ExtendedInfo, the Message resources that say
// what went wrong.
type errorBody struct {
	Error struct {
		Code         string    `json:"code"`
		Message      string    `json:"message"`
		ExtendedInfo []message `json:"@Message.ExtendedInfo"`
	} `json:"error"`
}

type message struct {
	Type            string   `json:"@odata.type"`
	MessageID       string   `json:"MessageId"`
	Message         string   `json:"Message"`
	MessageArgs     []string `json:"MessageArgs"`
	MessageSeverity string   `json:"MessageSeverity"`
	Resolution      string   `json:"Resolution,omitempty"`
}

// WriteError writes e as a Redfish error body.
func WriteError(w http.ResponseWriter, e *Error) {
	var b errorBody
	b.Error.Code = Registry + ".GeneralError"
	b.Error.Message = "A request failed; see @Message.ExtendedInfo for why."
	args := e.Args
	if args == nil {
		args = []string{}
	}
	sev := "Warning"
	if e.Status >= 500 || e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden {
		sev = "Critical"
	}
	b.Error.ExtendedInfo = []message{{
		Type: "#Message.v1_1_1.Message", MessageID: Registry + "." + e.ID, Message: e.Msg,
		MessageArgs: args, MessageSeverity: sev, Resolution: e.Resolution,
	}}
	body, _ := json.Marshal(b)
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("OData-Version", "4.0")
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	if e.Allow != "" {
		h.Set("Allow", e.Allow)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(e.Status)
	w.Write(body)
}

// FromStatus is the Redfish error for an answer of the daemon's that
// carries a status and a message (httpd's envelope errors on the Redfish
// routes: authentication, body limits, unknown paths).
func FromStatus(status int, msg string) *Error {
	e := &Error{Status: status, Msg: msg, ID: "GeneralError"}
	switch status {
	case http.StatusUnauthorized:
		e.ID, e.Resolution = "NoValidSession", "Send Basic credentials, or the X-Auth-Token of a session made at /redfish/v1/SessionService/Sessions."
	case http.StatusForbidden:
		e.ID = "InsufficientPrivilege"
	case http.StatusNotFound:
		e.ID = "ResourceNotFound"
	case http.StatusMethodNotAllowed:
		e.ID = "OperationNotAllowed"
	case http.StatusRequestEntityTooLarge:
		e.ID = "PayloadTooLarge"
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		e.ID = "ServiceTemporarilyUnavailable"
	case http.StatusInternalServerError:
		e.ID = "InternalError"
	}
	return e
}

func notFound(kind, name string) *Error {
	return &Error{Status: http.StatusNotFound, ID: "ResourceNotFound", Args: []string{kind, name},
		Msg: fmt.Sprintf("There is no %s named '%s' here.", kind, name)}
}

var errMalformedJSON = &Error{Status: http.StatusBadRequest, ID: "MalformedJSON",
	Msg: "The request body is not a JSON object.", Resolution: "Send a JSON object as the body."}

func paramMissing(action, param string) *Error {
	return &Error{Status: http.StatusBadRequest, ID: "ActionParameterMissing", Args: []string{action, param},
		Msg: fmt.Sprintf("The action %s needs the parameter %s.", action, param)}
}

func paramNotInList(value, param, action string, allowed []string) *Error {
	return &Error{Status: http.StatusBadRequest, ID: "ActionParameterValueNotInList", Args: []string{value, param, action},
		Msg: fmt.Sprintf("The value '%s' of %s is not one %s takes here: %v.", value, param, action, allowed)}
}

func paramType(value, param, action string) *Error {
	return &Error{Status: http.StatusBadRequest, ID: "ActionParameterValueTypeError", Args: []string{value, param, action},
		Msg: fmt.Sprintf("The value of %s in %s is of the wrong type.", param, action)}
}

func paramUnknown(action, param string) *Error {
	return &Error{Status: http.StatusBadRequest, ID: "ActionParameterUnknown", Args: []string{action, param},
		Msg: fmt.Sprintf("The action %s has no parameter %s.", action, param)}
}

func inUse(msg string, cause error) *Error {
	return &Error{Status: http.StatusConflict, ID: "ResourceInUse", Msg: msg, Err: cause,
		Resolution: "Try again when the operation under way is done."}
}
