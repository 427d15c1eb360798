// Package streamer runs PiKVM's video streamer, ustreamer, for the daemon,
// as kvmd's streamer controller does (kvmd/apps/kvmd/streamer/ in
// github.com/pikvm/kvmd, read at f14596e8), and answers kvmd's streamer
// API from it.
//
// ustreamer captures the HDMI picture through V4L2 and serves it as MJPEG
// over HTTP on a unix socket in a directory of the daemon's (Config.Dir):
// /state (its JSON state), /snapshot (one JPEG) and /stream (a
// multipart/x-mixed-replace stream). The Streamer starts it when a client
// needs the picture (Acquire: a stream, a snapshot, a WebSocket client
// that asked for the stream) and stops it when the last client has been
// gone for the shutdown delay, so that an idle KVM costs no CPU. It runs
// one copy at a time: a new one starts only after the old one was seen to
// end. One that dies is started again after a backoff (1 s, doubling up
// to 30 s while it keeps dying within 30 s of its start). Its output goes
// to the daemon's log, line by line at ustreamer's levels.
//
// The command line follows kvmd's configuration for the kind of capture
// (Args): the TC358743 on a Pi's CSI-2 port, a USB dongle, or vivid,
// the kernel's virtual capture device the booted-system test uses. The
// program's version and build features (ustreamer --version,
// --features) decide the options it is given: Debian 12 ships 4.9,
// Buildroot 2026.02 builds 6.52.
//
// ustreamer 4.9 keeps reporting "online" when the signal goes away; the
// daemon's own V4L2 reading (Config.Signal) is the truth for the signal,
// and a state or snapshot says offline whenever it sees none.
//
// Delays (shutdown, reset, backoff, state poll) run on an injectable
// clock (clockwork), so that tests are exact.
package streamer
