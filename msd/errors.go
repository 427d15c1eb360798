package msd

import "errors"

// Error is an MSD operation refused or failed, with kvmd's error name for
// it (kvmd/plugins/msd/__init__.py, otg/drive.py, disabled.py) and the
// HTTP status kvmd answers it with (kvmd/htserver.py: an IsBusyError is
// 409, any other operation error 400). Msg is for the user; Err, the
// cause, is for the log.
type Error struct {
	Name   string
	Msg    string
	Status int
	Err    error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return "msd: " + e.Msg + ": " + e.Err.Error()
	}
	return "msd: " + e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is makes every Error of the same name match its sentinel, with or
// without a cause.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Name == e.Name
}

// with returns a copy of e carrying cause.
func (e *Error) with(cause error) *Error {
	c := *e
	c.Err = cause
	return &c
}

// withMsg returns a copy of e saying msg.
func (e *Error) withMsg(msg string) *Error {
	c := *e
	c.Msg = msg
	return &c
}

// The errors of kvmd's MSD, by its names. Their messages are this
// daemon's own.
var (
	ErrBusy           = &Error{Name: "MsdIsBusyError", Status: 409, Msg: "Another operation on the virtual media is in progress; try again when it is done"}
	ErrOffline        = &Error{Name: "MsdOfflineError", Status: 400, Msg: "The virtual media drive is not available: no USB gadget LUN or no image storage"}
	ErrConnected      = &Error{Name: "MsdConnectedError", Status: 400, Msg: "The drive is connected to the host; disconnect it first"}
	ErrDisconnected   = &Error{Name: "MsdDisconnectedError", Status: 400, Msg: "The drive is not connected to the host"}
	ErrNotSelected    = &Error{Name: "MsdImageNotSelected", Status: 400, Msg: "No image is selected: choose one with set_params first"}
	ErrUnknownImage   = &Error{Name: "MsdUnknownImageError", Status: 400, Msg: "There is no such image in the storage"}
	ErrImageExists    = &Error{Name: "MsdImageExistsError", Status: 400, Msg: "An image of this name is already in the storage; remove it first or choose another name"}
	ErrRemoteDisabled = &Error{Name: "MsdRemoteDisabledError", Status: 400, Msg: "Remote images (an URL as the image) are not supported; download the image with write_remote first"}
	ErrPermissions    = &Error{Name: "MsdPermissionsError", Status: 400, Msg: "The drive cannot open the image: permission denied"}
	ErrLocked         = &Error{Name: "MsdLockedError", Status: 400, Msg: "The drive is busy: the host holds the medium or the drive is in use"}
	ErrDisabled       = &Error{Name: "MsdDisabledError", Status: 400, Msg: "Virtual media is disabled on this device"}
	ErrOperation      = &Error{Name: "MsdOperationError", Status: 400, Msg: "The virtual media operation failed"}
	// ErrNoSpace has no kvmd counterpart (kvmd lets the disk fill): the
	// image does not fit in the storage's free space.
	ErrNoSpace = &Error{Name: "MsdNoSpaceError", Status: 413, Msg: "The image does not fit in the storage's free space"}
)

// ErrBadName is wrapped by CheckName's errors.
var ErrBadName = errors.New("msd: bad image name")
