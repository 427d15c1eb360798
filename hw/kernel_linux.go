package hw

import "golang.org/x/sys/unix"

// unameMachine returns uname(2)'s machine field.
func unameMachine() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", err
	}
	return unix.ByteSliceToString(u.Machine[:]), nil
}
