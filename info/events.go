package info

import (
	"bytes"
	"context"
	"encoding/json"
	"time"
)

// EventEvery is how often Watch looks: kvmd's health state_poll
// (kvmd/apps/_scheme.py, info.hw.state_poll: 5 s) and its uptime's
// resolution (info/uptime.py: 5 s).
const EventEvery = 5 * time.Second

// Watch sends the info events kvmd sends after a client's greeting
// (pikvm/kvmd at f14596e8, kvmd/apps/kvmd/info/: each sub-manager's state
// as an event of its own, {"<field>": state}, which is
// Result([]string{field}, false)),
// every interval while listening says someone listens, until ctx ends:
// health when it changed (kvmd's HealthInfoSubmanager yields a changed
// state each state_poll), uptime each time (UptimeInfoSubmanager yields
// every 5 s), and node when the host name changed. The other fields
// change only when their files do, and kvmd sends them again only on a
// client's greeting. Nothing is read while nobody listens.
func (s *Source) Watch(ctx context.Context, interval time.Duration, listening func() bool, publish func(eventType string, event any)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	prev := map[string][]byte{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !listening() {
			clear(prev) // a new client has had the whole greeting
			continue
		}
		for _, f := range []string{"health", "uptime", "node"} {
			b := s.Result([]string{f}, false)
			old, seen := prev[f]
			prev[f] = b
			if f == "uptime" || (seen && !bytes.Equal(old, b)) {
				publish("info", json.RawMessage(b))
			}
		}
	}
}
