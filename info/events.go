package info

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"kvmd/subsystem"
)

// EventEvery is how often the info subsystem looks for changes: kvmd's
// health state_poll (kvmd/apps/_scheme.py, info.hw.state_poll: 5 s) and
// its uptime's resolution (info/uptime.py: 5 s).
const EventEvery = 5 * time.Second

// EventFields are kvmd's info sub-managers in the order of its
// InfoManager (kvmd/apps/kvmd/info/__init__.py). Each sends its state as
// an info event of its own, {"<field>": state}, when a client connects
// (trigger_state, then poll_state yields {field: value}), which is
// Result([]string{field}, false).
var EventFields = []string{"system", "auth", "meta", "extras", "health", "uptime", "node", "fan"}

// Subsystem is the info as kvmd's "info" subsystem (package subsystem's
// shape), its events {"<field>": state} as /api/info?fields=<field>&legacy=0
// has them.
type Subsystem struct {
	S *Source
	// Listeners, when set, says how many WebSocket clients listen
	// (events.Hub): with none, nothing is read.
	Listeners interface{ Len() int }
	// Every is how often Watch looks (0: EventEvery).
	Every time.Duration
}

// Name is kvmd's.
func (s Subsystem) Name() string { return "info" }

// State is every category in the current layout.
func (s Subsystem) State(context.Context) json.RawMessage {
	return json.RawMessage(s.S.Result(newAll, false))
}

// Greeting is one event per sub-manager, in kvmd's order.
func (s Subsystem) Greeting(context.Context) []json.RawMessage {
	evs := make([]json.RawMessage, 0, len(EventFields))
	for _, f := range EventFields {
		evs = append(evs, json.RawMessage(s.S.Result([]string{f}, false)))
	}
	return evs
}

// watched are the fields Watch reads, each as Result has it.
type watched struct{ health, uptime, node []byte }

// Watch sends the info events kvmd sends after a client's greeting
// (pikvm/kvmd at f14596e8, kvmd/apps/kvmd/info/), every Every while a
// client listens, until ctx ends: health when it changed (kvmd's
// HealthInfoSubmanager yields a changed state each state_poll), uptime
// each time (UptimeInfoSubmanager yields every 5 s), and node when the host
// name changed. The other fields change only when their files do, and
// kvmd sends them again only on a client's greeting. Nothing is read while
// nobody listens.
func (s Subsystem) Watch(ctx context.Context, publish func(json.RawMessage)) {
	p := subsystem.Poll[watched, json.RawMessage]{
		Every: s.Every,
		Read: func(context.Context) watched {
			return watched{s.S.Result([]string{"health"}, false), s.S.Result([]string{"uptime"}, false), s.S.Result([]string{"node"}, false)}
		},
		Changes: func(prev *watched, cur watched) []json.RawMessage {
			var evs []json.RawMessage
			if prev != nil && !bytes.Equal(prev.health, cur.health) {
				evs = append(evs, cur.health)
			}
			evs = append(evs, cur.uptime)
			if prev != nil && !bytes.Equal(prev.node, cur.node) {
				evs = append(evs, cur.node)
			}
			return evs
		},
	}
	if p.Every <= 0 {
		p.Every = EventEvery
	}
	if s.Listeners != nil {
		p.Idle = func() bool { return s.Listeners.Len() == 0 }
	}
	p.Run(ctx, publish)
}
