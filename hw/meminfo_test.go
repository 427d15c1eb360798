package hw

import "testing"

// meminfoPi4 is proc/meminfo from a 4 GB Raspberry Pi 4 (Linux 6.6).
const meminfoPi4 = `MemTotal:        3884360 kB
MemFree:         2804288 kB
MemAvailable:    3388964 kB
Buffers:           38828 kB
Cached:           653652 kB
SwapCached:            0 kB
Active:           381384 kB
Inactive:         495848 kB
Active(anon):       1528 kB
Inactive(anon):   192220 kB
Active(file):     379856 kB
Inactive(file):   303628 kB
Unevictable:       16384 kB
Mlocked:              16 kB
SwapTotal:        102396 kB
SwapFree:         102396 kB
Zswap:                 0 kB
Zswapped:              0 kB
Dirty:                12 kB
Writeback:             0 kB
AnonPages:        201140 kB
Mapped:           139520 kB
Shmem:              8988 kB
KReclaimable:      41040 kB
Slab:              74688 kB
SReclaimable:      41040 kB
SUnreclaim:        33648 kB
KernelStack:        3104 kB
PageTables:         5396 kB
SecPageTables:         0 kB
NFS_Unstable:          0 kB
Bounce:                0 kB
WritebackTmp:          0 kB
CommitLimit:     2044576 kB
Committed_AS:    1182720 kB
VmallocTotal:   259653632 kB
VmallocUsed:       12052 kB
VmallocChunk:          0 kB
Percpu:              768 kB
CmaTotal:         524288 kB
CmaFree:          466228 kB
`

// meminfoX86 is the head of proc/meminfo from an x86 virtual machine;
// HugePages lines carry no unit.
const meminfoX86 = `MemTotal:       24684096 kB
MemFree:        23828764 kB
MemAvailable:   24302656 kB
Buffers:            9044 kB
Cached:           622712 kB
SwapCached:            0 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
DirectMap4k:      141248 kB
`

// meminfoOld is proc/meminfo from Linux 2.6.32, before MemAvailable.
const meminfoOld = `MemTotal:         949444 kB
MemFree:          735392 kB
Buffers:           14232 kB
Cached:           115820 kB
SwapCached:            0 kB
Active:            97456 kB
`

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name        string
		in          string
		want        Mem
		wantPercent float64
		wantErr     bool
	}{
		{"pi 4", meminfoPi4, Mem{3884360 << 10, 3388964 << 10}, 12.8, false},
		{"x86", meminfoX86, Mem{24684096 << 10, 24302656 << 10}, 1.5, false},
		{"before MemAvailable", meminfoOld, Mem{949444 << 10, (735392 + 14232 + 115820) << 10}, 8.8, false},
		{"MemFree only", "MemTotal: 1000 kB\nMemFree: 250 kB\n", Mem{1000 << 10, 250 << 10}, 75, false},
		{"no trailing newline", "MemTotal: 1000 kB\nMemAvailable: 1000 kB", Mem{1000 << 10, 1000 << 10}, 0, false},
		{"empty", "", Mem{}, 0, true},
		{"garbage", "this is not meminfo\n", Mem{}, 0, true},
		{"no MemTotal", "MemFree: 1 kB\nMemAvailable: 1 kB\n", Mem{}, 0, true},
		{"zero MemTotal", "MemTotal: 0 kB\nMemAvailable: 0 kB\n", Mem{}, 0, true},
		{"no available", "MemTotal: 1000 kB\nBuffers: 1 kB\n", Mem{}, 0, true},
		{"truncated line", "MemTotal:        3884360 kB\nMemAvailable:    33", Mem{}, 0, true},
		{"no unit", "MemTotal: 1000\nMemAvailable: 10 kB\n", Mem{}, 0, true},
		{"wrong unit", "MemTotal: 1000 MB\nMemAvailable: 10 kB\n", Mem{}, 0, true},
		{"garbage value", "MemTotal: lots kB\nMemAvailable: 10 kB\n", Mem{}, 0, true},
		{"negative", "MemTotal: -1000 kB\nMemAvailable: 10 kB\n", Mem{}, 0, true},
		{"overflows uint64", "MemTotal: 18446744073709551616 kB\nMemAvailable: 10 kB\n", Mem{}, 0, true},
		{"overflows in bytes", "MemTotal: 18014398509481984 kB\nMemAvailable: 10 kB\n", Mem{}, 0, true},
		{"repeated", "MemTotal: 1000 kB\nMemTotal: 2000 kB\nMemAvailable: 10 kB\n", Mem{}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMeminfo([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseMeminfo() error = %v, want error %v", err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
			if p := got.Percent(); p != tt.wantPercent {
				t.Errorf("Percent() = %v, want %v", p, tt.wantPercent)
			}
		})
	}
}

func TestMemPercent(t *testing.T) {
	tests := []struct {
		name string
		m    Mem
		want float64
	}{
		{"half", Mem{200, 100}, 50},
		{"rounds to a tenth", Mem{3, 1}, 66.7},
		// psutil's round() goes to the nearest tenth of the exact binary
		// value: 0.25 is exact, a tie, and goes to even.
		{"tie to even", Mem{400, 399}, 0.2},
		{"full", Mem{100, 0}, 100},
		{"zero total", Mem{}, 0},
		{"available above total", Mem{100, 200}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.m.Percent(); got != tt.want {
				t.Errorf("%+v.Percent() = %v, want %v", tt.m, got, tt.want)
			}
		})
	}
}

func TestMemInfoFS(t *testing.T) {
	got, err := writeSysTree(t, map[string]string{"proc/meminfo": meminfoPi4}).MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	if d := diffSys(Mem{3884360 << 10, 3388964 << 10}, got); d != "" {
		t.Error(d)
	}
}

func FuzzParseMeminfo(f *testing.F) {
	for _, s := range []string{meminfoPi4, meminfoX86, meminfoOld, "", "MemTotal: 1 kB\n", "MemTotal: 18014398509481983 kB\nMemFree: 18014398509481983 kB\nBuffers: 18014398509481983 kB\nCached: 18014398509481983 kB\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMeminfo(b)
		if err != nil {
			return
		}
		if m.Total == 0 || m.Total%1024 != 0 || m.Available%1024 != 0 {
			t.Errorf("parseMeminfo(%q) = %+v, want whole kB and a total", b, m)
		}
		if p := m.Percent(); p < 0 || p > 100 {
			t.Errorf("Percent() = %v for %+v", p, m)
		}
	})
}
