package auth

import (
	"errors"
	"path/filepath"
	"time"
)

// safetyPoll is how often the files are looked at even when inotify
// watches them: a change inotify cannot see (a file system that does not
// report it) is still taken, late.
const safetyPoll = 5 * time.Second

// dirWatch is the inotify watch of the files' directories, or why there
// is none.
type dirWatch struct {
	events <-chan struct{}
	stop   func()
	err    error
}

// errPollAsked is the watch's absence when StoreConfig.Poll asks for it.
var errPollAsked = errors.New("polling asked for")

// startWatch watches the files' directories.
func (s *Store) startWatch() *dirWatch {
	if s.cfg.Poll {
		return &dirWatch{err: errPollAsked}
	}
	dirs, names := s.watched()
	events, stop, err := watchDirs(dirs, names)
	return &dirWatch{events: events, stop: stop, err: err}
}

// watch follows the files until Close: a re-read on every inotify event
// of one of them, or a poll every PollEvery where inotify is missing.
func (s *Store) watch(w *dirWatch) {
	defer close(s.done)
	if w.err != nil {
		every := s.pollEvery()
		if !errors.Is(w.err, errPollAsked) {
			s.log.Warn("credential files polled: inotify is unavailable", "every", every.String(), "err", w.err)
		}
		s.poll(every)
		return
	}
	events := w.events
	defer w.stop()
	safety := time.NewTicker(safetyPoll)
	defer safety.Stop()
	for {
		select {
		case <-s.stop:
			return
		case _, ok := <-events:
			if !ok {
				every := s.pollEvery()
				s.log.Warn("credential files polled: their directory's watch was lost", "every", every.String())
				s.poll(every)
				return
			}
			s.reload(s.Reload)
		case <-safety.C:
			s.reload(s.reloadIfChanged)
		}
	}
}

func (s *Store) pollEvery() time.Duration {
	if s.cfg.PollEvery > 0 {
		return s.cfg.PollEvery
	}
	return 100 * time.Millisecond
}

// poll re-reads the files when their stamps change, every every, until
// Close.
func (s *Store) poll(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.reload(s.reloadIfChanged)
		}
	}
}

func (s *Store) reload(how func() error) {
	if err := how(); err != nil {
		s.log.Warn("credential files not re-read", "err", err)
	}
}

// watched returns the directories to watch and the names in them that
// matter: those of the four files, and of the files symbolic links among
// them point to.
func (s *Store) watched() (dirs []string, names map[string]bool) {
	names = map[string]bool{}
	seen := map[string]bool{}
	add := func(p string) {
		d := filepath.Dir(p)
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
		names[filepath.Base(p)] = true
	}
	for _, p := range []string{s.users, s.roles, s.tokens, s.pending} {
		add(p)
		if t, err := filepath.EvalSymlinks(p); err == nil && t != p {
			add(t)
		}
	}
	return dirs, names
}
