package diag

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// clockSynced asks the kernel whether the clock is synchronised: an NTP
// client (timesyncd, chrony) clears STA_UNSYNC once it has set the clock,
// and adjtimex answers TIME_ERROR while it is set.
func clockSynced() (bool, string, error) {
	var tx unix.Timex
	state, err := unix.Adjtimex(&tx)
	if err != nil {
		return false, "", fmt.Errorf("adjtimex: %w", err)
	}
	synced := state != unix.TIME_ERROR && tx.Status&unix.STA_UNSYNC == 0
	detail := fmt.Sprintf("adjtimex: state %d, status %#x, max error %d µs, estimated error %d µs, synchronised: %t\n",
		state, tx.Status, tx.Maxerror, tx.Esterror, synced)
	return synced, detail, nil
}

// pseudoFS are the file systems whose space is no disk's.
var pseudoFS = map[string]bool{"proc": true, "sysfs": true, "devpts": true, "cgroup": true, "cgroup2": true, "securityfs": true,
	"debugfs": true, "tracefs": true, "configfs": true, "pstore": true, "bpf": true, "mqueue": true, "hugetlbfs": true,
	"fusectl": true, "autofs": true, "binfmt_misc": true, "rpc_pipefs": true, "nsfs": true, "efivarfs": true, "overlay": false}

// diskUse writes the space of each mounted file system, and returns those
// at least 90% full.
func diskUse(w *bytes.Buffer) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var full []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || pseudoFS[f[2]] || seen[f[1]] {
			continue
		}
		seen[f[1]] = true
		var st unix.Statfs_t
		if err := unix.Statfs(f[1], &st); err != nil || st.Blocks == 0 {
			continue
		}
		total := st.Blocks * uint64(st.Bsize)
		avail := st.Bavail * uint64(st.Bsize)
		used := float64(st.Blocks-st.Bfree) / float64(st.Blocks-st.Bfree+st.Bavail) * 100
		fmt.Fprintf(w, "%-30s %-10s %6.1f%% used, %d MiB free of %d MiB\n", f[1], f[2], used, avail>>20, total>>20)
		if used >= 90 && f[2] != "squashfs" && f[2] != "iso9660" {
			full = append(full, fmt.Sprintf("%s (%.0f%%)", f[1], used))
		}
	}
	return full, nil
}
