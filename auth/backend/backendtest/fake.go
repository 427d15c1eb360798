// Package backendtest has a fake backend.Backend for the tests of the code
// that uses one: an in-memory user list, with calls counted and delays,
// errors and stalls under the test's control.
package backendtest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"kvmd/auth/backend"
	"kvmd/internal/sleep"
)

// Fake is an in-memory backend.Backend. Its zero value knows no user.
type Fake struct {
	// Kind is what Name returns ("fake" when empty).
	Kind string

	mu        sync.Mutex
	users     map[string]string
	delay     time.Duration
	err       error
	stall     chan struct{}
	deaf      bool // stalls ignore the context
	calls     int
	active    int
	maxActive int
	seen      []string
}

// New returns a Fake that knows users (name -> password).
func New(users map[string]string) *Fake {
	f := &Fake{}
	for u, p := range users {
		f.Set(u, p)
	}
	return f
}

// Name returns Kind, or "fake".
func (f *Fake) Name() string {
	if f.Kind == "" {
		return "fake"
	}
	return f.Kind
}

// Set adds user or changes the password.
func (f *Fake) Set(user, passwd string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.users == nil {
		f.users = map[string]string{}
	}
	f.users[user] = passwd
}

// SetDelay makes every answer take d (cut short by the context, which then
// gives backend.ErrUnavailable, as a real backend does).
func (f *Fake) SetDelay(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delay = d
}

// SetErr makes every answer err (nil: answer from the user list).
func (f *Fake) SetErr(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Stall makes every Verify wait until the returned function is called.
// With deaf set it waits even past its context, as a broken backend would;
// otherwise the context's end gives backend.ErrUnavailable. The release
// function may be called more than once.
func (f *Fake) Stall(deaf bool) (release func()) {
	ch := make(chan struct{})
	f.mu.Lock()
	f.stall, f.deaf = ch, deaf
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			if f.stall == ch {
				f.stall = nil
			}
			f.mu.Unlock()
			close(ch)
		})
	}
}

// Calls returns the number of Verify calls so far.
func (f *Fake) Calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// Active returns the number of Verify calls running now.
func (f *Fake) Active() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active
}

// MaxActive returns the most Verify calls that ran at once.
func (f *Fake) MaxActive() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxActive
}

// Seen returns "user:password" of every Verify call, in order.
func (f *Fake) Seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.seen...)
}

// WaitIdle waits up to d for no Verify call to be running, and reports
// whether none is.
func (f *Fake) WaitIdle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if f.Active() == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

// Verify answers from the user list, after the delay or stall set.
func (f *Fake) Verify(ctx context.Context, user, passwd string) error {
	f.mu.Lock()
	f.calls++
	f.active++
	f.maxActive = max(f.maxActive, f.active)
	f.seen = append(f.seen, user+":"+passwd)
	delay, ferr, stall, deaf := f.delay, f.err, f.stall, f.deaf
	want, known := f.users[user]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.active--
		f.mu.Unlock()
	}()

	var ctxDone <-chan struct{}
	if !deaf {
		ctxDone = ctx.Done()
	}
	if stall != nil {
		select {
		case <-stall:
		case <-ctxDone:
			return fmt.Errorf("%w: %w", backend.ErrUnavailable, ctx.Err())
		}
	}
	if delay > 0 {
		if err := sleep.For(ctx, delay); err != nil {
			return fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
		}
	}
	switch {
	case ferr != nil:
		return ferr
	case !known:
		return fmt.Errorf("%w: no such user", backend.ErrRejected)
	case passwd != want:
		return fmt.Errorf("%w: wrong password", backend.ErrRejected)
	}
	return nil
}
