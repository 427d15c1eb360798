package httpd

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the user and group of the process at the other end of a
// unix socket (SO_PEERCRED: as it was when it connected).
func peerCred(c net.Conn) (uid, gid uint32, ok bool) {
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return 0, 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return 0, 0, false
	}
	return cred.Uid, cred.Gid, true
}
