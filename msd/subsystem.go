package msd

import (
	"context"

	"kvmd/subsystem"
)

// Subsystem is the virtual media as kvmd's "msd" subsystem (package
// subsystem's shape). A nil M is kvmd's disabled MSD (virtual media
// turned off): Disabled(), never changing.
type Subsystem struct {
	M *Manager
}

// Name is kvmd's.
func (s Subsystem) Name() string { return "msd" }

// State is the virtual media's state now.
func (s Subsystem) State(context.Context) State {
	if s.M == nil {
		return Disabled()
	}
	return s.M.State()
}

// Watch reads the storage and the LUN every Config.PollEvery, and at once
// after an operation, brings the virtual drive in line with them
// (refresh), and publishes its first state and each that differs from
// the last, until ctx ends.
func (s Subsystem) Watch(ctx context.Context, publish func(State)) {
	if s.M == nil {
		<-ctx.Done()
		return
	}
	subsystem.Poll[State, State]{Every: s.M.every, Wake: s.M.kick, Changes: firstOrChanged,
		Read: func(context.Context) State {
			s.M.refresh()
			return s.M.State()
		}}.Run(ctx, publish)
}

// firstOrChanged publishes the first state too: Watch may start after an
// upload or an operation began, and a state it never compared with
// anything would otherwise not go out until it changed again.
func firstOrChanged(prev *State, cur State) []State {
	if prev == nil {
		return []State{cur}
	}
	return subsystem.IfChanged(prev, cur)
}
