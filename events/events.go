// Package events fans kvmd's state events out to the WebSocket clients:
// each event is encoded once, in kvmd's {"event_type", "event"} envelope,
// and queued to every subscriber without waiting for any of them. A
// subscriber whose queue is full is dropped (its Dropped channel closes):
// one slow client never delays the others.
package events

import (
	"encoding/json"
	"sync"
)

// QueueLen is how many events a subscriber may have unsent before it is
// dropped.
const QueueLen = 64

// Encode returns the envelope of one event.
func Encode(eventType string, event any) ([]byte, error) {
	return json.Marshal(struct {
		Type  string `json:"event_type"`
		Event any    `json:"event"`
	}{eventType, event})
}

// Hub is a set of subscribers. The zero value is ready to use.
type Hub struct {
	mu   sync.Mutex
	subs map[*Sub]struct{}
}

// Sub is one subscriber.
type Sub struct {
	// C carries encoded events.
	C chan []byte
	// Dropped is closed when the subscriber fell behind and was removed.
	Dropped chan struct{}
}

// Subscribe adds a subscriber; Unsubscribe must follow.
func (h *Hub) Subscribe() *Sub {
	s := &Sub{C: make(chan []byte, QueueLen), Dropped: make(chan struct{})}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*Sub]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Unsubscribe removes s.
func (h *Hub) Unsubscribe(s *Sub) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
}

// Len returns the number of subscribers.
func (h *Hub) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Publish sends an event to every subscriber. An event that cannot be
// encoded is dropped (the values published here are plain structs).
func (h *Hub) Publish(eventType string, event any) {
	b, err := Encode(eventType, event)
	if err != nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		select {
		case s.C <- b:
		default:
			delete(h.subs, s)
			close(s.Dropped)
		}
	}
}
