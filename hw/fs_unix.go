//go:build unix

package hw

import (
	"fmt"
	"io/fs"
	"syscall"
)

// Owner returns the user rel belongs to.
func (f FS) Owner(rel string) (int, error) {
	fi, err := f.Stat(rel)
	if err != nil {
		return -1, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return -1, fmt.Errorf("%s: no owner", rel)
	}
	return int(st.Uid), nil
}

// OwnedBy reports whether rel belongs to uid with permission bits mode.
func (f FS) OwnedBy(rel string, uid int, mode fs.FileMode) bool {
	fi, err := f.Stat(rel)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid && fi.Mode().Perm() == mode
}
