package redfish

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"

	"kvmd/atx"
)

// ResetTypes are the ComputerSystem.Reset types served, kvmd's, each an
// action of the ATX board (kvmd/apps/kvmd/api/redfish/atx.py): On and
// ForceOn press power when the host is off, GracefulShutdown when it is
// on, ForceOff holds power (power_long) when it is on, ForceRestart
// presses reset when it is on, PushPowerButton presses power whatever
// the state.
var ResetTypes = []string{"On", "ForceOff", "GracefulShutdown", "ForceRestart", "ForceOn", "PushPowerButton"}

// ATX adapts the ATX board (package atx's Controller) to Power.
type ATX struct {
	C interface {
		State() atx.State
		Power(ctx context.Context, action string, wait bool) error
		Click(ctx context.Context, button string, wait bool) error
	}
}

// PowerState is the board's: enabled when it has ATX wiring, on when the
// power LED is.
func (a ATX) PowerState() (enabled, on bool) {
	st := a.C.State()
	return st.Enabled, st.Leds.Power
}

// Reset performs t as kvmd's Redfish does, without waiting for the press
// to end (kvmd's wait=False).
func (a ATX) Reset(ctx context.Context, t string) error {
	switch t {
	case "On", "ForceOn":
		return a.C.Power(ctx, atx.ActionOn, false)
	case "ForceOff":
		return a.C.Power(ctx, atx.ActionOffHard, false)
	case "GracefulShutdown":
		return a.C.Power(ctx, atx.ActionOff, false)
	case "ForceRestart":
		return a.C.Power(ctx, atx.ActionResetHard, false)
	case "PushPowerButton":
		return a.C.Click(ctx, atx.ButtonPower, false)
	}
	return errors.New("redfish: unknown reset type " + t)
}

// system returns the power, or a 404 when there is no computer system
// (no ATX wiring).
func (s *Service) system() (Power, bool, error) {
	p := s.cfg.Power
	if p == nil {
		return nil, false, notFound("ComputerSystem", "0")
	}
	enabled, on := p.PowerState()
	if !enabled {
		return nil, false, notFound("ComputerSystem", "0")
	}
	return p, on, nil
}

// Systems answers GET /redfish/v1/Systems: system 0 when the board has ATX
// wiring, as kvmd lists it.
func (s *Service) Systems(w http.ResponseWriter, r *http.Request) error {
	var members []string
	if _, _, err := s.system(); err == nil {
		members = append(members, SystemPath)
	}
	return writeJSON(w, http.StatusOK, newCollection(SystemsPath, "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection", members...))
}

// hostChars are those kvmd keeps of the host name.
var hostChars = regexp.MustCompile(`[^a-zA-Z0-9_.]`)

type computerSystem struct {
	ID         string `json:"@odata.id"`
	Type       string `json:"@odata.type"`
	Identity   string `json:"Id"`
	Name       string `json:"Name"`
	HostName   string `json:"HostName"`
	PowerState string `json:"PowerState"`
	Actions    struct {
		Reset struct {
			Allowed []string `json:"ResetType@Redfish.AllowableValues"`
			Target  string   `json:"target"`
		} `json:"#ComputerSystem.Reset"`
		BootOrder struct {
			Target string `json:"target"`
		} `json:"#ComputerSystem.SetDefaultBootOrder"`
	} `json:"Actions"`
	Boot struct {
		Enabled string  `json:"BootSourceOverrideEnabled"`
		Target  *string `json:"BootSourceOverrideTarget"`
	} `json:"Boot"`
	Links struct {
		ManagedBy []odata `json:"ManagedBy"`
	} `json:"Links"`
}

// System answers GET /redfish/v1/Systems/0: its power state from the
// power LED, its reset action, and the manager whose virtual media it
// boots from (Links.ManagedBy, which Ironic follows to find it).
func (s *Service) System(w http.ResponseWriter, r *http.Request) error {
	_, on, err := s.system()
	if err != nil {
		return err
	}
	cs := computerSystem{ID: SystemPath, Type: "#ComputerSystem.v1_10_0.ComputerSystem", Identity: "0",
		Name: "Host", HostName: hostChars.ReplaceAllString(s.cfg.HostName(), "_"), PowerState: "Off"}
	if on {
		cs.PowerState = "On"
	}
	cs.Actions.Reset.Allowed, cs.Actions.Reset.Target = ResetTypes, ResetPath
	cs.Actions.BootOrder.Target = BootOrderPath
	cs.Boot.Enabled = "Disabled"
	cs.Links.ManagedBy = []odata{{ManagerPath}}
	return writeJSON(w, http.StatusOK, cs)
}

// PatchSystem answers PATCH /redfish/v1/Systems/0 with 204, as kvmd does
// (pikvm/pikvm#1525): the OKD installer sets boot overrides, which a KVM
// cannot apply; the body must still be a JSON object.
func (s *Service) PatchSystem(w http.ResponseWriter, r *http.Request) error {
	return s.accepted(w, r)
}

// accepted answers 204 to a request on the system with a JSON object for
// its body, doing nothing.
func (s *Service) accepted(w http.ResponseWriter, r *http.Request) error {
	if _, _, err := s.system(); err != nil {
		return err
	}
	if _, err := readObject(r); err != nil {
		return err
	}
	return noContent(w)
}

// Reset answers POST .../Actions/ComputerSystem.Reset {"ResetType": T}.
func (s *Service) Reset(w http.ResponseWriter, r *http.Request) error {
	const action = "ComputerSystem.Reset"
	p, _, err := s.system()
	if err != nil {
		return err
	}
	obj, err := readParams(r, action, "ResetType")
	if err != nil {
		return err
	}
	t, ok, err := stringParam(obj, action, "ResetType")
	switch {
	case err != nil:
		return err
	case !ok:
		return paramMissing(action, "ResetType")
	case !slices.Contains(ResetTypes, t):
		return paramNotInList(t, "ResetType", action, ResetTypes)
	}
	if err := p.Reset(r.Context(), t); err != nil {
		if errors.Is(err, atx.ErrBusy) {
			return inUse("The ATX board is pressing a button; try again when it is done.", err)
		}
		return &Error{Status: http.StatusBadRequest, ID: "GeneralError", Msg: "The ATX operation failed.", Err: err}
	}
	s.cfg.Log.Info("redfish reset", "type", t, "user", s.cfg.Caller(r.Context()).User)
	return noContent(w)
}

// SetDefaultBootOrder answers POST .../Actions/ComputerSystem.SetDefaultBootOrder
// with 204: kvmd lists the action for the OKD installer (pikvm/pikvm#1525);
// the host's boot order is the host's.
func (s *Service) SetDefaultBootOrder(w http.ResponseWriter, r *http.Request) error {
	return s.accepted(w, r)
}
