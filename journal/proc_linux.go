package journal

import (
	"os"
	"strconv"
	"syscall"
)

// sysProcAttr puts journalctl in its own process group, which Close kills
// as a whole, and has the kernel kill it if the daemon dies first.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

func killGroup(p *os.Process) {
	syscall.Kill(-p.Pid, syscall.SIGKILL)
	p.Kill() // through its pidfd: safe even if the group is gone
}

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
