package metrics

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The process's families (process_*), under the names, types and HELP
// texts of client_golang 1.25's collectors.NewProcessCollector
// (prometheus/process_collector.go, process_collector_procfsenabled.go),
// read from /proc as prometheus/procfs reads them: stat for the CPU time,
// the memory and the start, limits for the soft limits, the fd directory,
// net/netstat for the bytes of the process's network namespace.

// userHZ is the kernel's USER_HZ, the unit of the CPU times in
// /proc/<pid>/stat: 100 on every architecture Linux exports to user space
// (procfs assumes the same).
const userHZ = 100

// procSelf is the process's own /proc directory, and the machine's /proc
// beside it.
var procSelf = procDir{self: "/proc/self", proc: "/proc"}

// procDir reads one process's /proc directory (self) and the machine's
// /proc (proc); tests give it a fixture tree.
type procDir struct {
	self, proc string
}

// processCollector writes the process_* families.
type processCollector struct {
	dir                                     procDir
	pageSize                                int
	cpu, openFDs, maxFDs, vsize, maxVsize   *desc
	rss, start, receiveBytes, transmitBytes *desc
}

func newProcessCollector(dir procDir) *processCollector {
	return &processCollector{
		dir:           dir,
		pageSize:      os.Getpagesize(),
		cpu:           newDesc("process_cpu_seconds_total", typeCounter, "Total user and system CPU time spent in seconds."),
		openFDs:       newDesc("process_open_fds", typeGauge, "Number of open file descriptors."),
		maxFDs:        newDesc("process_max_fds", typeGauge, "Maximum number of open file descriptors."),
		vsize:         newDesc("process_virtual_memory_bytes", typeGauge, "Virtual memory size in bytes."),
		maxVsize:      newDesc("process_virtual_memory_max_bytes", typeGauge, "Maximum amount of virtual memory available in bytes."),
		rss:           newDesc("process_resident_memory_bytes", typeGauge, "Resident memory size in bytes."),
		start:         newDesc("process_start_time_seconds", typeGauge, "Start time of the process since unix epoch in seconds."),
		receiveBytes:  newDesc("process_network_receive_bytes_total", typeCounter, "Number of bytes received by the process over the network."),
		transmitBytes: newDesc("process_network_transmit_bytes_total", typeCounter, "Number of bytes sent by the process over the network."),
	}
}

// collect adds the process_* families to e. What cannot be read is left
// out (as client_golang leaves out what procfs cannot read, though it
// also fails the scrape then): off Linux, all of them.
func (c *processCollector) collect(e *exposition) {
	if st, err := c.dir.stat(); err == nil {
		e.add(c.cpu, float64(st.utime+st.stime)/userHZ)
		e.add(c.vsize, float64(st.vsize))
		e.add(c.rss, float64(st.rss*int64(c.pageSize)))
		if boot, err := c.dir.bootTime(); err == nil {
			e.add(c.start, float64(boot)+float64(st.starttime)/userHZ)
		}
	}
	if n, err := c.dir.openFDs(); err == nil {
		e.add(c.openFDs, float64(n))
	}
	if l, err := c.dir.limits(); err == nil {
		e.add(c.maxFDs, l.openFiles)
		e.add(c.maxVsize, l.addressSpace)
	}
	if in, out, err := c.dir.netOctets(); err == nil {
		e.add(c.receiveBytes, in)
		e.add(c.transmitBytes, out)
	}
}

// errProcFormat is a /proc file that does not read as the kernel writes it.
var errProcFormat = errors.New("metrics: unexpected /proc format")

// procStat is what the process families use of /proc/<pid>/stat.
type procStat struct {
	utime, stime, starttime, vsize uint64
	rss                            int64
}

func (d procDir) stat() (procStat, error) {
	b, err := os.ReadFile(filepath.Join(d.self, "stat"))
	if err != nil {
		return procStat{}, err
	}
	return parseStat(string(b))
}

// parseStat reads /proc/<pid>/stat (proc_pid_stat(5)): the command's name
// is in parentheses and may hold spaces and parentheses itself, so the
// fields are counted from the last ')'; field 3 (state) is the first after
// it.
func parseStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("stat: no command name: %w", errProcFormat)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 22 {
		return procStat{}, fmt.Errorf("stat: %d fields after the name: %w", len(f), errProcFormat)
	}
	field := func(n int) (uint64, error) { return strconv.ParseUint(f[n-3], 10, 64) }
	var st procStat
	var err error
	for _, p := range []struct {
		n int
		v *uint64
	}{{14, &st.utime}, {15, &st.stime}, {22, &st.starttime}, {23, &st.vsize}} {
		if *p.v, err = field(p.n); err != nil {
			return procStat{}, fmt.Errorf("stat field %d: %w", p.n, err)
		}
	}
	if st.rss, err = strconv.ParseInt(f[24-3], 10, 64); err != nil {
		return procStat{}, fmt.Errorf("stat field 24: %w", err)
	}
	return st, nil
}

// bootTime reads the machine's boot time, in seconds since the epoch (the
// btime line of /proc/stat).
func (d procDir) bootTime() (uint64, error) {
	f, err := os.Open(filepath.Join(d.proc, "stat"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return parseBootTime(f)
}

func parseBootTime(r io.Reader) (uint64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("stat btime: %w", err)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("stat: no btime: %w", errProcFormat)
}

// openFDs counts the entries of the fd directory (the one reading it
// included, as procfs counts).
func (d procDir) openFDs() (int, error) {
	f, err := os.Open(filepath.Join(d.self, "fd"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names), err
}

// procLimits are the soft limits the process families use; unlimited is
// the largest uint64, as procfs reads it.
type procLimits struct {
	openFiles, addressSpace float64
}

func (d procDir) limits() (procLimits, error) {
	f, err := os.Open(filepath.Join(d.self, "limits"))
	if err != nil {
		return procLimits{}, err
	}
	defer f.Close()
	return parseLimits(f)
}

// parseLimits reads /proc/<pid>/limits: a header, then per limit its name
// and its soft limit, hard limit and unit in columns.
func parseLimits(r io.Reader) (procLimits, error) {
	var l procLimits
	var found int
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		for _, lim := range []struct {
			name string
			v    *float64
		}{{"Max open files", &l.openFiles}, {"Max address space", &l.addressSpace}} {
			rest, ok := strings.CutPrefix(sc.Text(), lim.name+" ")
			if !ok {
				continue
			}
			f := strings.Fields(rest)
			if len(f) == 0 {
				return procLimits{}, fmt.Errorf("limits: %s: no value: %w", lim.name, errProcFormat)
			}
			if f[0] == "unlimited" {
				*lim.v = math.MaxUint64
			} else {
				n, err := strconv.ParseUint(f[0], 10, 64)
				if err != nil {
					return procLimits{}, fmt.Errorf("limits: %s: %w", lim.name, err)
				}
				*lim.v = float64(n)
			}
			found++
		}
	}
	if err := sc.Err(); err != nil {
		return procLimits{}, err
	}
	if found != 2 {
		return procLimits{}, fmt.Errorf("limits: open files or address space missing: %w", errProcFormat)
	}
	return l, nil
}

// netOctets reads the IP bytes received and sent in the process's network
// namespace (IpExt's InOctets and OutOctets in net/netstat); a kernel
// without them reads 0, as in client_golang.
func (d procDir) netOctets() (in, out float64, err error) {
	f, err := os.Open(filepath.Join(d.self, "net", "netstat"))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return parseNetstat(f)
}

// parseNetstat reads net/netstat: pairs of lines, the first naming the
// fields of a group ("IpExt: InNoRoutes ... InOctets OutOctets ..."), the
// second their values.
func parseNetstat(r io.Reader) (in, out float64, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		names := strings.Fields(sc.Text())
		if !sc.Scan() {
			break
		}
		values := strings.Fields(sc.Text())
		if len(names) == 0 || names[0] != "IpExt:" {
			continue
		}
		if len(values) != len(names) || values[0] != names[0] {
			return 0, 0, fmt.Errorf("netstat: IpExt: %w", errProcFormat)
		}
		for i, name := range names[1:] {
			var v *float64
			switch name {
			case "InOctets":
				v = &in
			case "OutOctets":
				v = &out
			default:
				continue
			}
			n, err := strconv.ParseFloat(values[i+1], 64)
			if err != nil {
				return 0, 0, fmt.Errorf("netstat: IpExt %s: %w", name, err)
			}
			*v = n
		}
	}
	return in, out, sc.Err()
}
