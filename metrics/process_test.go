package metrics

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Captures of /proc on a Debian build machine (Linux 6.18, amd64), made
// with cat for this test: cat's own stat and limits, the IpExt lines of its
// net/netstat, the btime line of /proc/stat.
const (
	statCapture = "5645 (cat) R 5643 5643 27574 0 -1 4194304 98 0 0 0 0 0 0 0 20 0 1 0 1635014 3133440 382 " +
		"18446744073709551615 94049182998528 94049183018409 140737286962688 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 " +
		"94049183034416 94049183036032 94049319944192 140737286965956 140737286965976 140737286965976 140737286967275 0\n"
	limitsCapture = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max file size             unlimited            unlimited            bytes     
Max data size             unlimited            unlimited            bytes     
Max stack size            8388608              unlimited            bytes     
Max core file size        0                    unlimited            bytes     
Max resident set          unlimited            unlimited            bytes     
Max processes             96365                96365                processes 
Max open files            20000                20000                files     
Max locked memory         8388608              8388608              bytes     
Max address space         unlimited            unlimited            bytes     
Max file locks            unlimited            unlimited            locks     
Max pending signals       96365                96365                signals   
Max msgqueue size         819200               819200               bytes     
Max nice priority         0                    0                    
Max realtime priority     0                    0                    
Max realtime timeout      unlimited            unlimited            us        
`
	netstatCapture = `TcpExt: SyncookiesSent SyncookiesRecv
TcpExt: 0 0
IpExt: InNoRoutes InTruncatedPkts InMcastPkts OutMcastPkts InBcastPkts OutBcastPkts InOctets OutOctets InMcastOctets OutMcastOctets InBcastOctets OutBcastOctets InCsumErrors InNoECTPkts InECT1Pkts InECT0Pkts InCEPkts ReasmOverlaps
IpExt: 0 0 0 0 0 0 88389289293 87944319624 0 0 0 0 0 86802901 0 0 0 0
`
	procStatCapture = "cpu  1 2 3 4\nbtime 1795704393\nprocesses 5646\n"
)

func TestParseStat(t *testing.T) {
	want := procStat{utime: 0, stime: 0, starttime: 1635014, vsize: 3133440, rss: 382}
	got, err := parseStat(statCapture)
	if err != nil || got != want {
		t.Errorf("parseStat = %+v, %v; want %+v", got, err, want)
	}
	// A name with spaces and parentheses moves no field.
	odd := strings.Replace(statCapture, "(cat)", "(a) b (c))", 1)
	odd = strings.Replace(odd, " 0 0 0 0 20 ", " 7 5 0 0 20 ", 1)
	if got, err := parseStat(odd); err != nil || got.utime != 7 || got.stime != 5 || got.rss != 382 {
		t.Errorf("parseStat(odd name) = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "1 cat R 2", "1 (cat) R 2 3", strings.Replace(statCapture, " 382 ", " x ", 1)} {
		if _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestParseLimits(t *testing.T) {
	got, err := parseLimits(strings.NewReader(limitsCapture))
	if want := (procLimits{openFiles: 20000, addressSpace: math.MaxUint64}); err != nil || got != want {
		t.Errorf("parseLimits = %+v, %v; want %+v", got, err, want)
	}
	limited := strings.Replace(limitsCapture, "Max address space         unlimited", "Max address space         4294967296", 1)
	if got, err := parseLimits(strings.NewReader(limited)); err != nil || got.addressSpace != 4294967296 {
		t.Errorf("parseLimits(limited) = %+v, %v", got, err)
	}
	for _, bad := range []string{"", strings.Replace(limitsCapture, "Max open files            20000", "Max open files            many", 1)} {
		if _, err := parseLimits(strings.NewReader(bad)); err == nil {
			t.Errorf("parseLimits(%q): no error", bad)
		}
	}
	if _, err := parseLimits(strings.NewReader("Limit  Soft\n")); !errors.Is(err, errProcFormat) {
		t.Errorf("parseLimits(no limits) = %v, want errProcFormat", err)
	}
}

func TestParseNetstat(t *testing.T) {
	in, out, err := parseNetstat(strings.NewReader(netstatCapture))
	if err != nil || in != 88389289293 || out != 87944319624 {
		t.Errorf("parseNetstat = %v, %v, %v", in, out, err)
	}
	// Without IpExt (a kernel without it), 0 as client_golang writes.
	if in, out, err := parseNetstat(strings.NewReader("TcpExt: A\nTcpExt: 1\n")); err != nil || in != 0 || out != 0 {
		t.Errorf("parseNetstat(no IpExt) = %v, %v, %v", in, out, err)
	}
	if _, _, err := parseNetstat(strings.NewReader("IpExt: InOctets OutOctets\nIpExt: 1\n")); !errors.Is(err, errProcFormat) {
		t.Errorf("parseNetstat(short values) = %v, want errProcFormat", err)
	}
}

// TestProcessFamilies writes the process families of a fixture /proc made
// of the captures, with three open descriptors.
func TestProcessFamilies(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"self/stat":        strings.Replace(statCapture, " 0 0 0 0 20 ", " 250 125 0 0 20 ", 1),
		"self/limits":      limitsCapture,
		"self/net/netstat": netstatCapture,
		"self/fd/0":        "", "self/fd/1": "", "self/fd/2": "",
		"stat": procStatCapture,
	}
	for name, s := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newProcessCollector(procDir{self: filepath.Join(root, "self"), proc: root})
	c.pageSize = 4096
	x := newExposition()
	c.collect(x)
	var b bytes.Buffer
	if err := x.write(&b); err != nil {
		t.Fatal(err)
	}
	want := `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 3.75
# HELP process_max_fds Maximum number of open file descriptors.
# TYPE process_max_fds gauge
process_max_fds 20000
# HELP process_network_receive_bytes_total Number of bytes received by the process over the network.
# TYPE process_network_receive_bytes_total counter
process_network_receive_bytes_total 8.8389289293e+10
# HELP process_network_transmit_bytes_total Number of bytes sent by the process over the network.
# TYPE process_network_transmit_bytes_total counter
process_network_transmit_bytes_total 8.7944319624e+10
# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 3
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 1.564672e+06
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.79572074314e+09
# HELP process_virtual_memory_bytes Virtual memory size in bytes.
# TYPE process_virtual_memory_bytes gauge
process_virtual_memory_bytes 3.13344e+06
# HELP process_virtual_memory_max_bytes Maximum amount of virtual memory available in bytes.
# TYPE process_virtual_memory_max_bytes gauge
process_virtual_memory_max_bytes 1.8446744073709552e+19
`
	if got := b.String(); got != want {
		t.Errorf("(-want +got):\n%s", lineDiff(want, got))
	}

	// Without /proc (another system), no process family and no error.
	x = newExposition()
	newProcessCollector(procDir{self: filepath.Join(root, "none"), proc: filepath.Join(root, "none")}).collect(x)
	b.Reset()
	if err := x.write(&b); err != nil || b.Len() != 0 {
		t.Errorf("without /proc: %v\n%s", err, b.String())
	}
}
