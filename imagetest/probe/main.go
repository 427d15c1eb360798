// Command probe is the booted test's hand inside the guest: it tries what
// a process may do to device nodes and files and prints one line per try,
// "OP PATH ok" or "OP PATH ERRNO" (ENOENT, EACCES, EPERM, EROFS...). The
// test runs it inside kvmd.service's sandbox (its cgroup, whose device
// policy systemd enforces, and its mount namespace) to see what the daemon
// can reach, and outside as other users. It opens devices with O_NONBLOCK
// and O_NOCTTY and never reads or writes them.
//
//	probe devs                  open every device node in /dev read-only ("dev MAJ:MIN PATH ok|ERRNO")
//	probe open r|w|rw PATH...   open each
//	probe write DATA PATH...    write DATA to each existing file
//	probe create PATH...        create each new file, then remove it
//	probe mkdir PATH...         make each directory, then remove it
//
// Several of these in one run are separated by "--" (each process the
// test starts in the guest costs a second or two under emulation).
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: probe devs | open r|w|rw PATH... | write DATA PATH... | create PATH... | mkdir PATH... [-- ...]")
		os.Exit(2)
	}
	var group []string
	for _, a := range append(os.Args[1:], "--") {
		if a != "--" {
			group = append(group, a)
			continue
		}
		if len(group) > 0 {
			do(group[0], group[1:])
		}
		group = nil
	}
}

func do(op string, args []string) {
	switch op {
	case "devs":
		devs()
	case "open":
		flags := map[string]int{"r": unix.O_RDONLY, "w": unix.O_WRONLY, "rw": unix.O_RDWR}[args[0]]
		for _, p := range args[1:] {
			report("open-"+args[0], p, openClose(p, flags))
		}
	case "write":
		for _, p := range args[1:] {
			report("write", p, write(p, args[0]))
		}
	case "create":
		for _, p := range args {
			fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o600)
			if err == nil {
				unix.Close(fd)
				err = unix.Unlink(p)
			}
			report("create", p, err)
		}
	case "mkdir":
		for _, p := range args {
			err := unix.Mkdir(p, 0o755)
			if err == nil {
				err = unix.Rmdir(p)
			}
			report("mkdir", p, err)
		}
	default:
		fmt.Fprintf(os.Stderr, "probe: unknown %q\n", op)
		os.Exit(2)
	}
}

func openClose(p string, flags int) error {
	fd, err := unix.Open(p, flags|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func write(p, data string) error {
	fd, err := unix.Open(p, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	_, err = unix.Write(fd, []byte(data))
	return err
}

func report(op, p string, err error) {
	fmt.Printf("%s %s %s\n", op, p, errName(err))
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	var e unix.Errno
	if errors.As(err, &e) {
		return unix.ErrnoName(e)
	}
	return strings.ReplaceAll(err.Error(), " ", "_")
}

// devs opens every character and block device node below /dev read-only,
// but the watchdogs (opening one arms it) and the consoles (a hang-up).
func devs() {
	var nodes []string
	filepath.WalkDir("/dev", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type()&fs.ModeDevice != 0 {
			nodes = append(nodes, p)
		}
		return nil
	})
	sort.Strings(nodes)
	for _, p := range nodes {
		base := filepath.Base(p)
		if strings.HasPrefix(base, "watchdog") || base == "console" || strings.HasPrefix(base, "tty") || strings.HasPrefix(base, "hvc") {
			continue
		}
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			continue
		}
		kind := "char"
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			kind = "block"
		}
		fmt.Printf("dev %s %d:%d %s %s\n", kind, unix.Major(uint64(st.Rdev)), unix.Minor(uint64(st.Rdev)), p,
			errName(openClose(p, unix.O_RDONLY)))
	}
}
