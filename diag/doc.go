// Package diag writes the support bundle: one zip archive a user attaches
// to a ticket, with a summary.txt for a person first, then what a support
// engineer needs to see (the /api/info JSON, the service's journal of this
// and the previous boot, kernel messages, USB gadget, V4L2, GPIO,
// throttling, network, systemd units, disk and memory, versions and the
// effective configuration).
//
// Each file comes from a probe with its own timeout inside an overall
// limit: a probe that fails or hangs is cut, and its error is recorded in
// summary.txt and in the file it would have written, so the bundle is
// always complete. Every byte passes through a Redactor before it is
// written: secrets (password hashes, the TOTP secret, session tokens, TLS
// keys, backend secrets, credential headers) never reach the archive, and
// with RedactIdentities neither do user names, addresses or the host name.
//
// The archive is a zip: archive/zip streams it (no seeking, so it goes
// straight into an HTTP reply), and Windows, macOS and Linux open it with
// their own tools.
//
// Every file is read through the hw.FS root, so the bundle of a fixture
// tree or the demo board holds that tree, not this machine; commands that
// ask the running system (systemctl, ip, the clock) run only when the root
// is "/".
package diag
