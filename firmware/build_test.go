package firmware

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"kvmd/internal/testutil"
)

// target is one binary of `make cross`.
type target struct {
	name    string // as in dist/kvmd-linux-NAME
	goarch  string
	goarm   string
	class   elf.Class
	machine elf.Machine
	// qemu is the emulator and its flags, with the CPU of the oldest
	// board the binary is for; nil for amd64, which runs natively.
	qemu []string
}

var targets = []target{
	// Pi 3, 4, 5 and Zero 2 W on a 64-bit OS; the Cortex-A53 (Pi 3,
	// Zero 2 W) is the plainest ARMv8.0 core among them.
	{name: "arm64", goarch: "arm64", class: elf.ELFCLASS64, machine: elf.EM_AARCH64,
		qemu: []string{"qemu-aarch64", "-cpu", "cortex-a53"}},
	// Pi 2 onwards on a 32-bit OS; the Pi 2's BCM2836 has Cortex-A7 cores.
	{name: "armv7", goarch: "arm", goarm: "7", class: elf.ELFCLASS32, machine: elf.EM_ARM,
		qemu: []string{"qemu-arm", "-cpu", "cortex-a7"}},
	// Pi 1, Zero and Zero W: the BCM2835's ARM1176JZF-S, ARMv6 with VFPv2.
	{name: "armv6", goarch: "arm", goarm: "6", class: elf.ELFCLASS32, machine: elf.EM_ARM,
		qemu: []string{"qemu-arm", "-cpu", "arm1176"}},
	{name: "amd64", goarch: "amd64", class: elf.ELFCLASS64, machine: elf.EM_X86_64},
}

// version is what the tests stamp into their builds.
const version = "firmware-test"

// maxARM64Size bounds the stripped arm64 binary.
const maxARM64Size = 15 << 20

// goBuild builds kvmd for tg from the module in dir into out, the way
// the Makefile's cross target does (keep the two in step), with env
// added to the environment.
func goBuild(dir, out string, tg target, env ...string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version, "-o", out, "./cmd/kvmd")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+tg.goarch, "GOARM="+tg.goarm)
	cmd.Env = append(cmd.Env, env...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %v\n%s", tg.name, err, b)
	}
	return nil
}

// moduleRoot is the kvmd module, the parent of this package.
var moduleRoot = func() string {
	dir, err := filepath.Abs("..")
	if err != nil {
		panic(err)
	}
	return dir
}()

// binaries builds each target at most once per test run, for every test
// that needs it, into a directory that TestMain removes.
type binaries struct {
	dir string
	mu  sync.Mutex
	m   map[string]*built
}

type built struct {
	once sync.Once
	path string
	err  error
	took time.Duration
}

var bins *binaries

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvmd-firmware-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bins = &binaries{dir: dir, m: map[string]*built{}}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// get returns the path of tg's binary, building it on first use.
func (b *binaries) get(t testing.TB, tg target) string {
	t.Helper()
	b.mu.Lock()
	e := b.m[tg.name]
	if e == nil {
		e = &built{}
		b.m[tg.name] = e
	}
	b.mu.Unlock()
	e.once.Do(func() {
		start := time.Now()
		e.path = filepath.Join(b.dir, "kvmd-linux-"+tg.name)
		e.err = goBuild(moduleRoot, e.path, tg)
		e.took = time.Since(start)
	})
	if e.err != nil {
		t.Fatal(e.err)
	}
	return e.path
}

// dynamicHeaders returns the program headers of a dynamically linked
// executable (an interpreter, a dynamic section) f has.
func dynamicHeaders(f *elf.File) []elf.ProgType {
	var hs []elf.ProgType
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			hs = append(hs, p.Type)
		}
	}
	return hs
}

// TestCrossBinaries checks what the builds are: static, stripped, for
// the right machine, without a build ID, and small enough.
func TestCrossBinaries(t *testing.T) {
	t.Parallel()
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			t.Parallel()
			path := bins.get(t, tg)
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Class != tg.class || f.Machine != tg.machine || f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
				t.Errorf("ELF %v %v %v, want %v %v for Linux", f.Class, f.Machine, f.OSABI, tg.class, tg.machine)
			}
			for _, h := range dynamicHeaders(f) {
				t.Errorf("has a %v program header: dynamically linked", h)
			}
			for _, s := range f.Sections {
				switch {
				case s.Name == ".symtab" || s.Name == ".dynsym":
					t.Errorf("has a symbol table %s: not stripped (-s)", s.Name)
				case strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_"):
					t.Errorf("has DWARF section %s (-w)", s.Name)
				case s.Name == ".note.go.buildid":
					if id := goBuildID(t, s, f.ByteOrder); id != "" {
						t.Errorf("build ID %q, want none (-buildid=)", id)
					}
				}
			}

			info, err := buildinfo.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{"CGO_ENABLED": "0", "GOOS": "linux", "GOARCH": tg.goarch, "-trimpath": "true"}
			if tg.goarm != "" {
				want["GOARM"] = tg.goarm
			}
			for _, s := range info.Settings {
				if w, ok := want[s.Key]; ok {
					if s.Value != w {
						t.Errorf("built with %s=%s, want %s", s.Key, s.Value, w)
					}
					delete(want, s.Key)
				}
			}
			if len(want) > 0 {
				t.Errorf("build info lacks %v", want)
			}

			st, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("firmware binary: arch=%s size_bytes=%d size_mib=%.2f", tg.name, st.Size(), float64(st.Size())/(1<<20))
			if tg.name == "arm64" && st.Size() >= maxARM64Size {
				t.Errorf("stripped arm64 binary is %d bytes, want under %d (15 MiB)", st.Size(), maxARM64Size)
			}
		})
	}
}

// goBuildID returns the build ID in a .note.go.buildid section.
func goBuildID(t *testing.T, s *elf.Section, order binary.ByteOrder) string {
	t.Helper()
	b, err := s.Data()
	if err != nil || len(b) < 12 {
		t.Fatalf("reading %s: %d bytes, %v", s.Name, len(b), err)
	}
	// An ELF note: name size, descriptor size, type, then the name "Go"
	// padded to 4 bytes and the descriptor, which is the ID.
	namesz := order.Uint32(b)
	descsz := order.Uint32(b[4:])
	off := 12 + (namesz+3)&^3
	if uint64(off)+uint64(descsz) > uint64(len(b)) {
		t.Fatalf("%s: malformed note", s.Name)
	}
	return string(b[off : off+descsz])
}

// TestReproducible builds every target a second time, from a copy of the
// module at another path, and wants the same bytes as the first build.
// The second arm64 build also starts from an empty build cache, so every
// package is compiled again, not just linked; the other three reuse the
// cache (a cold build takes about 20 s of two cores, and the compiler is
// the same for all four).
//
// It is not parallel: Go runs it before the parallel tests, so the cold
// build does not slow the emulated starts that TestSmoke times.
func TestReproducible(t *testing.T) {
	copyDir := filepath.Join(t.TempDir(), "elsewhere", "src", "kvmd")
	if err := testutil.CopyTree(moduleRoot, copyDir, ".git", "bin", "dist"); err != nil {
		t.Fatal(err)
	}
	for _, tg := range targets {
		t.Run(tg.name, func(t *testing.T) {
			first := bins.get(t, tg)
			second := filepath.Join(t.TempDir(), "kvmd-linux-"+tg.name)
			var env []string
			how := "warm cache"
			if tg.name == "arm64" {
				env = append(env, "GOCACHE="+t.TempDir())
				how = "empty cache"
			}
			start := time.Now()
			if err := goBuild(copyDir, second, tg, env...); err != nil {
				t.Fatal(err)
			}
			t.Logf("second build from %s, %s: %s", copyDir, how, time.Since(start).Round(time.Millisecond))
			a, err := os.ReadFile(first)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(second)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(a, b) {
				i := 0
				for i < len(a) && i < len(b) && a[i] == b[i] {
					i++
				}
				t.Errorf("two builds differ: %d and %d bytes, first difference at offset %#x", len(a), len(b), i)
			}
		})
	}
}
