package journal

import (
	"os"
	"strconv"
)

// watching tells whether journalctl (pid) has its inotify descriptor. It
// creates it in --follow mode only after it opened the journal files and
// applied --boot and --unit, the steps that fail on a bad journal: from
// then on it runs until killed.
func watching(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	names, _ := f.Readdirnames(-1)
	for _, n := range names {
		if l, err := os.Readlink(dir + n); err == nil && l == "anon_inode:inotify" {
			return true
		}
	}
	return false
}
