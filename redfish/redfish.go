// Package redfish serves the DMTF Redfish resources of a KVM, as kvmd does
// (kvmd/apps/kvmd/api/redfish/ in github.com/pikvm/kvmd, read at
// f14596e8) and as the clients people point at a BMC use them
// (redfishtool, sushy and through it Ironic and the OKD installer,
// Ansible's community.general.redfish_*): the service root, one computer
// system whose power is the ATX board, a manager whose virtual media is
// the MSD, and a session service whose sessions are the daemon's own.
//
// Its handlers are the rows of httpd's route table, which keeps their
// roles and authentication with every other route's; they answer with
// Redfish bodies, and their errors in Redfish's error format (errors.go).
// The package sees the devices and the sessions through narrow interfaces
// (Power, Media, Sessions), and who is calling through Config.Caller.
package redfish

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"kvmd/auth"
	"kvmd/msd"
)

// The resources' paths. The system and the manager have kvmd's ids.
const (
	Root              = "/redfish/v1"
	SystemsPath       = Root + "/Systems"
	SystemPath        = SystemsPath + "/0"
	ResetPath         = SystemPath + "/Actions/ComputerSystem.Reset"
	BootOrderPath     = SystemPath + "/Actions/ComputerSystem.SetDefaultBootOrder"
	ManagersPath      = Root + "/Managers"
	ManagerPath       = ManagersPath + "/BMC"
	VirtualMediaPath  = ManagerPath + "/VirtualMedia"
	MediaPath         = VirtualMediaPath + "/MSD"
	InsertPath        = MediaPath + "/Actions/VirtualMedia.InsertMedia"
	EjectPath         = MediaPath + "/Actions/VirtualMedia.EjectMedia"
	SessionService    = Root + "/SessionService"
	SessionsPath      = SessionService + "/Sessions"
	SessionMemberPath = SessionsPath + "/{id}"
)

// Power is the host's power through the ATX board.
type Power interface {
	// PowerState reports whether the board has ATX wiring, and whether
	// the host's power LED is on.
	PowerState() (enabled, on bool)
	// Reset performs a ComputerSystem.Reset type (ResetTypes).
	Reset(ctx context.Context, resetType string) error
}

// Media is the virtual media drive: package msd's Manager.
type Media interface {
	State() msd.State
	SetParams(msd.Params) error
	SetConnected(connected bool) error
	Download(ctx context.Context, rem *msd.Remote, name string, progress func(written int64)) error
}

// Sessions are the daemon's sessions, which an X-Auth-Token names.
type Sessions interface {
	// Login checks a password and starts a session, returning its token
	// and its id.
	Login(ctx context.Context, user, passwd string, addr netip.Addr) (token, id string, err error)
	// List lists the live sessions of user (everyone's for "").
	List(user string) []auth.SessionInfo
	// End ends session id if it is owner's (anyone's for ""); by is who
	// asked, for the log.
	End(id, owner string, by Caller) bool
}

// Caller is who a request is, as httpd authenticated it.
type Caller struct {
	User string
	Role auth.Role
	// Session is the id of the session the request came with, if any.
	Session string
	Method  auth.Method
	Addr    netip.Addr
}

// Config is what New needs.
type Config struct {
	// Power, when set, is the computer system's power; nil or a board
	// without ATX wiring leaves Systems empty.
	Power Power
	// Media, when set, is the manager's virtual media; nil leaves
	// VirtualMedia empty.
	Media Media
	// Sessions, when set, serves the session service; SessionTimeout is
	// how long, in seconds, one lives unused.
	Sessions       Sessions
	SessionTimeout int
	// Caller returns who made a request (httpd.IdentityFrom).
	Caller func(ctx context.Context) Caller
	// Remote are the options of a download for InsertMedia with a URL,
	// write_remote's.
	Remote msd.FetchOptions
	// HostName is the system's host name (kvmd: meta's server.host);
	// Version the daemon's, the manager's firmware version; UUID the
	// service's, when known.
	HostName func() string
	Version  string
	UUID     string
	Log      *slog.Logger
}

// Service is the Redfish resources over a Config. Create it with New.
type Service struct {
	cfg Config

	mu sync.Mutex
	// urls are the URLs images were inserted from, by image name: the
	// VirtualMedia's Image is what the client gave (Ansible finds the
	// medium to eject by it).
	urls map[string]string
	// stopDownload ends the download of an InsertMedia under way (an
	// EjectMedia calls it).
	stopDownload context.CancelFunc
}

// New returns the service of cfg.
func New(cfg Config) *Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Caller == nil {
		cfg.Caller = func(context.Context) Caller { return Caller{} }
	}
	if cfg.HostName == nil {
		cfg.HostName = func() string { return "" }
	}
	return &Service{cfg: cfg, urls: map[string]string{}}
}

// Handler is a handler of the route table: a method expression such as
// (*Service).Root.
type Handler func(s *Service, w http.ResponseWriter, r *http.Request) error

// odata is a link.
type odata struct {
	ID string `json:"@odata.id"`
}

// collection is a resource collection.
type collection struct {
	ID      string  `json:"@odata.id"`
	Type    string  `json:"@odata.type"`
	Name    string  `json:"Name"`
	Members []odata `json:"Members"`
	Count   int     `json:"Members@odata.count"`
}

func newCollection(id, typ, name string, members ...string) collection {
	c := collection{ID: id, Type: typ, Name: name, Members: []odata{}}
	for _, m := range members {
		c.Members = append(c.Members, odata{m})
	}
	c.Count = len(c.Members)
	return c
}

// writeJSON answers v with status, as Redfish wants it.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return &Error{Status: http.StatusInternalServerError, ID: "InternalError", Msg: "The answer could not be encoded.", Err: err}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("OData-Version", "4.0")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
	return nil
}

func noContent(w http.ResponseWriter) error {
	w.Header().Set("OData-Version", "4.0")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// maxBody bounds a request's body: httpd's limit comes first; this one
// holds when the handler is used without it.
const maxBody = 16 << 10

// readObject reads the request's body as a JSON object of raw values.
// An empty body is an empty object.
func readObject(r *http.Request) (map[string]json.RawMessage, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		return nil, &Error{Status: http.StatusBadRequest, ID: "MalformedJSON", Msg: "The request body could not be read.", Err: err}
	}
	if len(b) > maxBody {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, ID: "PayloadTooLarge", Msg: "The request body is too large."}
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil || obj == nil {
		return nil, errMalformedJSON
	}
	return obj, nil
}

// readParams reads an action's parameters, refusing one it does not take.
func readParams(r *http.Request, action string, takes ...string) (map[string]json.RawMessage, error) {
	obj, err := readObject(r)
	if err != nil {
		return nil, err
	}
	for k := range obj {
		if !slices.Contains(takes, k) {
			return nil, paramUnknown(action, k)
		}
	}
	return obj, nil
}

// stringParam reads a string parameter of an action: missing is "" and
// false; present but not a string is an error.
func stringParam(obj map[string]json.RawMessage, action, name string) (string, bool, error) {
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false, paramType(shortValue(raw), name, action)
	}
	return s, true, nil
}

// boolParam reads a boolean parameter of an action, def when missing.
func boolParam(obj map[string]json.RawMessage, action, name string, def bool) (bool, error) {
	raw, ok := obj[name]
	if !ok || string(raw) == "null" {
		return def, nil
	}
	var b bool
	if err := json.Unmarshal(raw, &b); err != nil {
		return false, paramType(shortValue(raw), name, action)
	}
	return b, nil
}

// shortValue is a JSON value for a message, cut short.
func shortValue(raw json.RawMessage) string {
	s := string(raw)
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return s
}
