package streamer

import "context"

// Subsystem is the streamer as kvmd's "streamer" subsystem (package
// subsystem's shape): its state, asked of the running streamer; for a new
// WebSocket client the last state seen; its changes, the parts of the
// state that changed (kvmd's granularity).
type Subsystem struct {
	S *Streamer
}

// Name is kvmd's.
func (s Subsystem) Name() string { return "streamer" }

// State is the full state, asked of the running streamer now.
func (s Subsystem) State(ctx context.Context) map[string]any { return s.S.State(ctx) }

// Greeting is the last state seen, at once.
func (s Subsystem) Greeting(context.Context) []map[string]any {
	return []map[string]any{s.S.Current()}
}

// Watch publishes the changes Run's watcher sees until ctx ends.
func (s Subsystem) Watch(ctx context.Context, publish func(map[string]any)) {
	s.S.changes.Watch(ctx, publish)
}

// Clients is kvmd's "clients" event: the count of WebSocket clients that
// asked for the stream.
type Clients struct {
	Count int `json:"count"`
}

// ClientsSubsystem is kvmd's "clients" subsystem. A nil S has no clients.
type ClientsSubsystem struct {
	S *Streamer
}

// Name is kvmd's.
func (c ClientsSubsystem) Name() string { return "clients" }

// State is the count now.
func (c ClientsSubsystem) State(context.Context) Clients {
	if c.S == nil {
		return Clients{}
	}
	return Clients{Count: c.S.Viewers()}
}

// Watch publishes each new count until ctx ends.
func (c ClientsSubsystem) Watch(ctx context.Context, publish func(Clients)) {
	if c.S == nil {
		<-ctx.Done()
		return
	}
	c.S.clients.Watch(ctx, publish)
}
