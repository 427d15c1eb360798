package atx

import "context"

// Subsystem is the ATX board as kvmd's "atx" subsystem (package
// subsystem's shape): its state, and its changes as the controller takes
// them. A nil C is kvmd's disabled ATX, on a board without ATX wiring:
// every flag false, never changing.
type Subsystem struct {
	C *Controller
}

// Name is kvmd's.
func (s Subsystem) Name() string { return "atx" }

// State is the board's state now.
func (s Subsystem) State(context.Context) State {
	if s.C == nil {
		return State{}
	}
	return s.C.State()
}

// Watch publishes each change of the state until ctx ends.
func (s Subsystem) Watch(ctx context.Context, publish func(State)) {
	if s.C == nil {
		<-ctx.Done()
		return
	}
	s.C.changes.Watch(ctx, publish)
}
