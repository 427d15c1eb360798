package hw

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// diffSys returns "" when want and got are deeply equal, else both values
// marked (-want +got).
func diffSys(want, got any) string {
	if reflect.DeepEqual(want, got) {
		return ""
	}
	return fmt.Sprintf("(-want +got):\n- %#v\n+ %#v", want, got)
}

// writeSysTree creates files (slash-separated path relative to a new temp
// root: content) and returns an FS on that root. A path ending in "/"
// makes an empty directory.
func writeSysTree(t *testing.T, files map[string]string) FS {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if strings.HasSuffix(rel, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return New(root)
}

func TestParseKernelString(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		wantErr  bool
	}{
		{"ostype", "Linux\n", "Linux", false},
		{"pi release", "6.6.31+rpt-rpi-v8\n", "6.6.31+rpt-rpi-v8", false},
		{"pi version", "#1 SMP PREEMPT Debian 1:6.6.31-1+rpt1 (2024-05-29)\n", "#1 SMP PREEMPT Debian 1:6.6.31-1+rpt1 (2024-05-29)", false},
		{"hostname", "pikvm\n", "pikvm", false},
		{"empty", "", "", true},
		{"blank", " \n\n", "", true},
		{"two lines", "a\nb\n", "", true},
		{"nul", "a\x00b", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseKernelString([]byte(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseKernelString(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := diffSys(tt.want, got); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestKernel(t *testing.T) {
	full := map[string]string{
		"proc/sys/kernel/ostype":    "Linux\n",
		"proc/sys/kernel/osrelease": "6.6.31+rpt-rpi-v8\n",
		"proc/sys/kernel/version":   "#1 SMP PREEMPT Debian 1:6.6.31-1+rpt1 (2024-05-29)\n",
		"proc/sys/kernel/arch":      "aarch64\n",
		"proc/sys/kernel/hostname":  "pikvm\n",
	}
	t.Run("full", func(t *testing.T) {
		f := writeSysTree(t, full)
		got, err := f.Kernel()
		if err != nil {
			t.Fatal(err)
		}
		want := Kernel{System: "Linux", Release: "6.6.31+rpt-rpi-v8", Version: "#1 SMP PREEMPT Debian 1:6.6.31-1+rpt1 (2024-05-29)", Machine: "aarch64"}
		if d := diffSys(want, got); d != "" {
			t.Error(d)
		}
		host, err := f.Hostname()
		if err != nil || host != "pikvm" {
			t.Errorf("Hostname() = %q, %v, want pikvm", host, err)
		}
	})
	t.Run("no arch on a fixture root", func(t *testing.T) {
		files := map[string]string{}
		for k, v := range full {
			files[k] = v
		}
		delete(files, "proc/sys/kernel/arch")
		got, err := writeSysTree(t, files).Kernel()
		if err != nil {
			t.Fatal(err)
		}
		// Not the live root: uname would describe the wrong machine.
		if got.Machine != "" || got.System != "Linux" {
			t.Errorf("Kernel() = %+v, want Linux with no machine", got)
		}
	})
	t.Run("no hostname", func(t *testing.T) {
		_, err := writeSysTree(t, map[string]string{"proc/": ""}).Hostname()
		if !Absent(err) {
			t.Errorf("Hostname() error = %v, want absent", err)
		}
	})
}

// readerCase is one FS reader with a tree it reads, the file it needs and
// garbage to put there.
type readerCase struct {
	name    string
	tree    map[string]string
	file    string
	garbage string
	read    func(FS) error
}

func TestReadersAbsentAndGarbage(t *testing.T) {
	cases := []readerCase{
		{"MemInfo", map[string]string{"proc/meminfo": "MemTotal: 1024 kB\nMemAvailable: 512 kB\n"}, "proc/meminfo", "MemTotal: lots\n",
			func(f FS) error { _, err := f.MemInfo(); return err }},
		{"CPUTimes", map[string]string{"proc/stat": "cpu  1 2 3 4 5 6 7 8 9 10\n"}, "proc/stat", "cpu  1 2 x 4\n",
			func(f FS) error { _, err := f.CPUTimes(); return err }},
		{"Uptime", map[string]string{"proc/uptime": "12.34 5.67\n"}, "proc/uptime", "soon\n",
			func(f FS) error { _, err := f.Uptime(); return err }},
		{"LoadAvg", map[string]string{"proc/loadavg": "0.57 1.97 2.19 1/87 10840\n"}, "proc/loadavg", "0.57 high\n",
			func(f FS) error { _, err := f.LoadAvg(); return err }},
		{"Hostname", map[string]string{"proc/sys/kernel/hostname": "pikvm\n"}, "proc/sys/kernel/hostname", "\n",
			func(f FS) error { _, err := f.Hostname(); return err }},
		{"Kernel", map[string]string{
			"proc/sys/kernel/ostype":    "Linux\n",
			"proc/sys/kernel/osrelease": "6.1.0\n",
			"proc/sys/kernel/version":   "#1 SMP\n",
		}, "proc/sys/kernel/osrelease", "",
			func(f FS) error { _, err := f.Kernel(); return err }},
		{"DeviceTree", map[string]string{"proc/device-tree/model": "Raspberry Pi 4 Model B Rev 1.5\x00"}, "proc/device-tree/model", "\x00",
			func(f FS) error { _, err := f.DeviceTree(); return err }},
		{"Throttled", map[string]string{"sys/devices/platform/soc/soc:firmware/get_throttled": "50005\n"}, "sys/devices/platform/soc/soc:firmware/get_throttled", "hot\n",
			func(f FS) error { _, err := f.Throttled(nil); return err }},
		{"ThermalZones", map[string]string{
			"sys/class/thermal/thermal_zone0/type": "cpu-thermal\n",
			"sys/class/thermal/thermal_zone0/temp": "45277\n",
		}, "sys/class/thermal/thermal_zone0/temp", "warm\n",
			func(f FS) error { _, err := f.ThermalZones(); return err }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := writeSysTree(t, c.tree)
			if err := c.read(f); err != nil {
				t.Fatalf("on a good tree: %v", err)
			}
			if err := os.WriteFile(f.Path(c.file), []byte(c.garbage), 0o644); err != nil {
				t.Fatal(err)
			}
			err := c.read(f)
			if err == nil || Absent(err) || !strings.Contains(err.Error(), "hw: parsing "+c.file) {
				t.Errorf("on garbage %q: error = %v, want a parse error naming %s", c.garbage, err, c.file)
			}
			if err := os.Remove(f.Path(c.file)); err != nil {
				t.Fatal(err)
			}
			if err := c.read(f); !Absent(err) {
				t.Errorf("with %s gone: error = %v, want absent", c.file, err)
			}
		})
	}
}
