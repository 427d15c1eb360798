package httpd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"kvmd/atx"
	"kvmd/events"
	"kvmd/subsystem"
	"kvmd/ugpio"
)

// Devices serves kvmd's device endpoints: /api/ws, /api/atx, /api/gpio,
// /api/hid, /api/msd (msd.go), /api/streamer. Paths, result shapes, error names and
// statuses follow github.com/pikvm/kvmd (read at f14596e8):
// kvmd/apps/kvmd/api/{atx,ugpio,hid,msd,streamer}.py, and
// kvmd/htserver.py for the statuses (an IsBusyError is 409, any other
// operation error 400).
type Devices struct {
	// Events carries the state changes to the WebSocket clients.
	Events *events.Hub
	// ATX is the ATX board; nil answers as kvmd's disabled ATX.
	ATX ATX
	// Subsystems are kvmd's subsystems, in the order of its greeting
	// (gpio, hid, atx, msd, streamer, info, hid_keymaps, clients: package
	// subsystem): a new WebSocket client is sent each one's greeting,
	// GET /api/<name> answers its state (deviceState), and its changes
	// come as events of its name on Events.
	Subsystems []subsystem.Subsystem
	// GPIO is the GPIO channels, for /api/gpio/switch and /pulse: the
	// board's inputs, read-only, and the output channels the
	// configuration declares. Nil: none.
	GPIO GPIO
	// Streamer, when set, serves the streamer's operations and
	// /streamer/stream and /streamer/snapshot (streamer.go); a WebSocket
	// client that asks for the stream keeps it running. Without it, its
	// operations answer UnavailableError.
	Streamer Streamer
	// StreamWriteTimeout cuts a /streamer/stream client that takes no
	// data for this long (default 20 s).
	StreamWriteTimeout time.Duration
	// MSD is the virtual media drive; nil answers its operations as
	// kvmd's disabled MSD (MsdDisabledError). Its state is the "msd"
	// subsystem's.
	MSD MSD
	// MSDStall bounds how long an image upload or read may stall
	// (0: DefaultMSDStall).
	MSDStall time.Duration
	// MSDRemoteDeny are the networks write_remote may not download from
	// (msd.FetchOptions.Deny); nil denies none.
	MSDRemoteDeny []netip.Prefix
	// Version is the daemon's version for the "loop" event's major and
	// minor numbers.
	Version string
	// HID, when set, is the keyboard and mouse: /api/hid's input and
	// settings, /api/ws's input messages.
	HID HID
	// H264, when set, is the picture in H.264: /api/media and
	// /api/media/ws (PiKVM's Direct H.264, media.go). WebRTC, when set
	// too, is its WebRTC sessions, signalled by WHEP at /api/media/whep.
	H264   H264
	WebRTC WebRTC
}

// GPIO is the board's GPIO channels (package devices implements it).
type GPIO interface {
	// HasChannel says whether name is an input channel: read-only.
	HasChannel(name string) bool
	// Switch and Pulse drive the output channel name: package ugpio's
	// errors, ErrNotFound for a name that is no output.
	Switch(ctx context.Context, name string, state, wait bool) error
	Pulse(ctx context.Context, name string, delay time.Duration, wait bool) error
}

// ATX is the ATX board (package atx implements it).
type ATX interface {
	State() atx.State
	Power(ctx context.Context, action string, wait bool) error
	Click(ctx context.Context, button string, wait bool) error
}

// errNoStreamer answers the streamer operations of Devices without a
// Streamer. That is a known state, not a fault (Expected): a viewer asking
// in a loop gets no error line each.
var errNoStreamer = &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError", Expected: true,
	Msg: "No streamer runs under this daemon: snapshots, streams and stream parameters are not available"}

// deviceState answers GET of a subsystem's state (its name is the
// route's path), as its event carries it; a subsystem the Devices do not
// have is UnavailableError.
func deviceState(name string) routeHandler {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		sub := s.subsystem(name)
		if sub == nil {
			return &Error{Status: http.StatusServiceUnavailable, Name: "UnavailableError", Expected: true,
				Msg: "This daemon has no " + name + " subsystem"}
		}
		return WriteJSON(w, sub.State(r.Context()))
	}
}

// subsystem returns the Devices' subsystem of that name, or nil.
func (s *Server) subsystem(name string) subsystem.Subsystem {
	for _, sub := range s.cfg.Devices.Subsystems {
		if sub.Name() == name {
			return sub
		}
	}
	return nil
}

// atxError maps the ATX's errors to kvmd's answers.
func atxError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, atx.ErrBusy):
		return &Error{Status: http.StatusConflict, Name: "AtxIsBusyError", Msg: "Performing another ATX operation, please try again later"}
	case errors.Is(err, atx.ErrDisabled):
		return &Error{Status: http.StatusBadRequest, Name: "AtxDisabledError", Msg: "ATX is disabled: this board has no ATX wiring"}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// wait=1 and the client went away: the click goes on.
		return err
	}
	return &Error{Status: http.StatusBadRequest, Name: "AtxOperationError", Msg: "The ATX operation failed", Err: err}
}

// oneOf reads a required query parameter that must be one of values.
func oneOf(r *http.Request, name string, values ...string) (string, error) {
	v := strings.ToLower(strings.TrimSpace(query(r).Get(name)))
	for _, ok := range values {
		if v == ok {
			return v, nil
		}
	}
	return "", BadParam(name, "not one of "+strings.Join(values, ", "))
}

func (s *Server) atxPower(w http.ResponseWriter, r *http.Request) error {
	action, err := oneOf(r, "action", atx.ActionOn, atx.ActionOff, atx.ActionOffHard, atx.ActionResetHard)
	if err != nil {
		return err
	}
	wait, err := queryBool(r, "wait", false)
	if err != nil {
		return err
	}
	a := s.cfg.Devices.ATX
	if a == nil {
		return atxError(atx.ErrDisabled)
	}
	if err := atxError(a.Power(r.Context(), action, wait)); err != nil {
		return err
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

func (s *Server) atxClick(w http.ResponseWriter, r *http.Request) error {
	button, err := oneOf(r, "button", atx.ButtonPower, atx.ButtonPowerLong, atx.ButtonReset)
	if err != nil {
		return err
	}
	wait, err := queryBool(r, "wait", false)
	if err != nil {
		return err
	}
	a := s.cfg.Devices.ATX
	if a == nil {
		return atxError(atx.ErrDisabled)
	}
	if err := atxError(a.Click(r.Context(), button, wait)); err != nil {
		return err
	}
	writeBody(w, http.StatusOK, okEmpty)
	return nil
}

// gpioAction answers /api/gpio/switch and /pulse. kvmd validates the
// parameters first (channel, then state or delay, then wait), then looks
// the channel up: unknown is GpioChannelNotFoundError; a channel that
// cannot switch or pulse (an input, or an output the configuration does
// not allow it) is GpioSwitchNotSupported or GpioPulseNotSupported, all
// 400; a busy channel is GpioChannelIsBusyError, 409.
func gpioAction(op string) routeHandler {
	return func(s *Server, w http.ResponseWriter, r *http.Request) error {
		q := query(r)
		ch := strings.TrimSpace(q.Get("channel"))
		if ch == "" || len(ch) > 255 {
			return BadParam("channel", "a channel name is required")
		}
		var state bool
		var delay time.Duration
		if op == "switch" {
			if _, ok := q["state"]; !ok {
				return BadParam("state", "not a boolean (1/true/yes or 0/false/no)")
			}
			var err error
			if state, err = queryBool(r, "state", false); err != nil {
				return err
			}
		} else if v := q.Get("delay"); v != "" {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				delay, err = ugpio.Seconds(f)
			}
			if err != nil {
				return BadParam("delay", fmt.Sprintf("not a number of seconds from 0 to %v", ugpio.MaxDelay.Seconds()))
			}
		}
		wait, err := queryBool(r, "wait", false)
		if err != nil {
			return err
		}
		g := s.cfg.Devices.GPIO
		if g == nil {
			return gpioError(ugpio.ErrNotFound)
		}
		if op == "switch" {
			err = g.Switch(r.Context(), ch, state, wait)
		} else {
			err = g.Pulse(r.Context(), ch, delay, wait)
		}
		switch {
		case !errors.Is(err, ugpio.ErrNotFound) || !g.HasChannel(ch):
		case op == "switch":
			err = ugpio.ErrSwitchNotSupported // an input
		default:
			err = ugpio.ErrPulseNotSupported
		}
		if err := gpioError(err); err != nil {
			return err
		}
		writeBody(w, http.StatusOK, okEmpty)
		return nil
	}
}

// gpioError maps package ugpio's errors to kvmd's answers
// (kvmd/apps/kvmd/ugpio.py, kvmd/plugins/ugpio/__init__.py).
func gpioError(err error) error {
	bad := func(name, msg string) *Error {
		return &Error{Status: http.StatusBadRequest, Name: name, Msg: msg, Err: err}
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ugpio.ErrNotFound):
		return bad("GpioChannelNotFoundError", "GPIO channel is not found")
	case errors.Is(err, ugpio.ErrSwitchNotSupported):
		return bad("GpioSwitchNotSupported", "This GPIO channel does not support switching")
	case errors.Is(err, ugpio.ErrPulseNotSupported):
		return bad("GpioPulseNotSupported", "This GPIO channel does not support pulsing")
	case errors.Is(err, ugpio.ErrBusy):
		return &Error{Status: http.StatusConflict, Name: "GpioChannelIsBusyError", Msg: "Performing another GPIO operation on this channel, please try again later"}
	case errors.Is(err, ugpio.ErrOffline):
		return bad("GpioDriverOfflineError", "The GPIO channel's line could not be driven")
	case errors.Is(err, ugpio.ErrClosed):
		return NotNow("The GPIO outputs are released: the daemon is stopping", err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// wait=1 and the client went away: the operation goes on.
		return err
	}
	return internalError(err)
}
