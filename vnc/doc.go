// Package vnc is the daemon's VNC server: RFB 3.8 (RFC 6143) for the VNC
// viewers people already run, as PiKVM's kvmd-vnc serves it
// (kvmd/apps/vnc/ in github.com/pikvm/kvmd, read at f14596e8), inside
// the daemon rather than as a proxy to it.
//
// A client authenticates through VeNCrypt's X509Plain: TLS with the
// daemon's certificate, then a user name and password checked as the
// HTTP API checks them (Authenticator; Sessions is the daemon's). A
// refusal tells the client why in RFB's failure reason. Viewers and up
// watch; operators and up also type and point, their key events (X
// keysyms) typed through the host's keymap (keyboard) and their pointer
// on the absolute mouse (HID).
//
// The picture is the streamer's JPEG frames (FrameSource): sent as they
// are in Tight's JPEG rectangles to a client that takes Tight with a JPEG
// quality level (kvmd-vnc's levels 0 to 9, qualities 10 to 100), encoded
// again when it asks for less than the stream's quality, and decoded for
// a client that takes only Raw. A change of the picture's size is sent as
// ExtendedDesktopSize or DesktopSize, or the picture is scaled to the
// client's size for a client that takes neither.
//
// Each connection runs three goroutines (the client's messages, the
// picture, the updates) that end together; Serve returns only once every
// connection's are gone.
package vnc
