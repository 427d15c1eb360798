// Package daemon is kvmd serve: it reads the machine (the real one under
// Config.Root, or the demo's stand-ins), builds the daemon's parts from a
// Config, and runs them as the children of one Supervisor until its
// context ends. main parses the flags and the config file into a Config
// and calls Run, as gokrazy's mains do; nothing else is wired anywhere
// else.
//
// The children start in the order they are added and stop in the
// reverse order, each once the one added after it has returned: the API
// tokens' writer first (stopped last, so that the last-used times are
// written), then the keyboard and mouse, the virtual media, the state
// watchers, the video streamer, the VNC server, the ATX board, systemd's
// watchdog, and the HTTP server last (stopped first, so that no request
// uses a part already stopped). Each has its restart policy (Restart): a watcher
// that ends on its own is started again after a backoff; the HTTP
// server's end stops the daemon.
package daemon
