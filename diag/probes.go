package diag

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"kvmd/hw"
	"kvmd/info"
	"kvmd/internal/procgroup"
	"kvmd/journal"
)

// facts are what the probes found that summary.txt turns into findings.
type facts struct {
	hw           *info.Hardware
	failedLogins *int
	clockSynced  *bool
	fullDisks    []string
}

func (b *Bundle) probes() []probe {
	return []probe{
		{"info.json", b.infoProbe},
		{"journal/this-boot.txt", func(ctx context.Context, w *bytes.Buffer) error { return b.journalFile(ctx, w, "0") }},
		{"journal/previous-boot.txt", func(ctx context.Context, w *bytes.Buffer) error { return b.journalFile(ctx, w, "-1") }},
		{"journal/auth-last-hour.txt", b.authProbe},
		{"kernel.txt", b.kernelProbe},
		{"usb.txt", b.usbProbe},
		{"video.txt", b.videoProbe},
		{"gpio.txt", b.gpioProbe},
		{"throttling.txt", b.throttlingProbe},
		{"network.txt", b.networkProbe},
		{"systemd.txt", b.systemdProbe},
		{"disk-memory.txt", b.diskProbe},
		{"clock.txt", b.clockProbe},
		{"versions.txt", b.versionsProbe},
		{"processes.txt", b.processesProbe},
		{"environment.txt", b.environmentProbe},
		{"config.yaml", b.configProbe},
	}
}

// live reports whether the root is this machine's, so that commands and
// system calls about the running system describe the same machine as the
// files.
func (b *Bundle) live() bool { return b.cfg.FS.Root() == "/" }

// errIsDir is readFile's answer for a directory, which a glob of files
// may match; files leaves it out.
var errIsDir = errors.New("is a directory")

// readFile reads a file below the root, at most max bytes. It opens
// without blocking, so that a FIFO or a device never hangs the probe on
// open, and gives up reading at ctx's deadline where the file allows one.
func (b *Bundle) readFile(ctx context.Context, rel string, max int) ([]byte, error) {
	f, err := b.cfg.FS.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s: %w", rel, errIsDir)
	}
	if d, ok := ctx.Deadline(); ok {
		f.SetReadDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Now()) })
	defer stop()
	data, err := io.ReadAll(io.LimitReader(f, int64(max)))
	if err != nil && !errors.Is(err, syscall.EAGAIN) {
		return data, fmt.Errorf("reading %s: %w", rel, err)
	}
	return data, nil
}

// section writes a heading.
func section(w *bytes.Buffer, title string) {
	if w.Len() > 0 {
		w.WriteByte('\n')
	}
	fmt.Fprintf(w, "== %s ==\n", title)
}

// files writes each file below the root matching the patterns, name and
// content; absent ones are left out. It returns the errors of the files
// that exist but cannot be read.
func (b *Bundle) files(ctx context.Context, w *bytes.Buffer, patterns ...string) error {
	var errs []error
	for _, pat := range patterns {
		names, _ := b.cfg.FS.Glob(pat)
		for _, n := range names {
			data, err := b.readFile(ctx, n, 64<<10)
			if err != nil {
				if unavailable(err) {
					fmt.Fprintf(w, "/%s: (unavailable: %v)\n", n, errors.Unwrap(err))
					continue
				}
				if !hw.Absent(err) && !errors.Is(err, errIsDir) && !errors.Is(err, syscall.EISDIR) {
					fmt.Fprintf(w, "/%s: error: %v\n", n, err)
					errs = append(errs, err)
				}
				continue
			}
			writeValue(w, "/"+n, data)
		}
	}
	return errors.Join(errs...)
}

// unavailable tells the errors with which a sysfs attribute says it has
// no value now (the carrier of an interface that is down, the speed of a
// virtual one) from a failure.
func unavailable(err error) bool {
	for _, e := range []error{syscall.EINVAL, syscall.ENODEV, syscall.EOPNOTSUPP, syscall.ENODATA, syscall.ENXIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// writeValue writes a file's content after its name: on the same line
// when it is one line, indented below otherwise, as hex when binary.
func writeValue(w *bytes.Buffer, name string, data []byte) {
	data = bytes.TrimRight(data, "\n\x00")
	if nul := bytes.ReplaceAll(data, []byte{0}, []byte(", ")); printable(nul) {
		data = nul // a device-tree string list
	}
	switch {
	case !printable(data):
		fmt.Fprintf(w, "%s: (binary, %d bytes) %x\n", name, len(data), data)
	case bytes.IndexByte(data, '\n') < 0:
		fmt.Fprintf(w, "%s: %s\n", name, data)
	default:
		fmt.Fprintf(w, "%s:\n", name)
		for line := range bytes.SplitSeq(data, []byte("\n")) {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 && c != '\n' && c != '\t' && c != '\r' || c == 0x7f || c == 0 {
			return false
		}
	}
	return true
}

// tree writes every file below dir (relative to the root), for configfs
// and sysfs directories whose layout is the information.
func (b *Bundle) tree(ctx context.Context, w *bytes.Buffer, dir string) error {
	if _, err := b.cfg.FS.Lstat(dir); err != nil {
		if hw.Absent(err) {
			fmt.Fprintf(w, "/%s: absent\n", dir)
			return nil
		}
		return err
	}
	var errs []error
	n := 0
	err := walk(b.cfg.FS, dir, func(rel string, d fs.DirEntry) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if n++; n > 2000 {
			return errors.New("more than 2000 entries; the rest left out")
		}
		if d.Type()&fs.ModeSymlink != 0 {
			t, _ := b.cfg.FS.Readlink(rel)
			fmt.Fprintf(w, "/%s -> %s\n", rel, t)
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := b.readFile(ctx, rel, 16<<10)
		if err != nil {
			fmt.Fprintf(w, "/%s: error: %v\n", rel, err)
			if !errors.Is(err, fs.ErrPermission) && !unavailable(err) {
				errs = append(errs, err)
			}
			return nil
		}
		writeValue(w, "/"+rel, data)
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// walk visits the entries below dir (relative to fsys's root) in name
// order without following symbolic links (configfs links a gadget's
// configs to its functions).
func walk(fsys hw.FS, dir string, fn func(string, fs.DirEntry) error) error {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		rel := dir + "/" + e.Name()
		if err := fn(rel, e); err != nil {
			return err
		}
		if e.IsDir() {
			if err := walk(fsys, rel, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// command runs a program, its output going to w after a line showing the
// command. It runs in a process group of its own, killed when ctx ends.
func command(ctx context.Context, w *bytes.Buffer, name string, args ...string) error {
	fmt.Fprintf(w, "$ %s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "SYSTEMD_PAGER=", "SYSTEMD_COLORS=0")
	out := &capped{max: maxFile}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procgroup.Attr()
	cmd.Cancel = func() error { procgroup.Kill(cmd.Process); return nil }
	cmd.WaitDelay = 500 * time.Millisecond
	err := cmd.Run()
	w.Write(out.b)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", name, ctx.Err())
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	b   []byte
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func writeJSON(w *bytes.Buffer, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		fmt.Fprintf(w, "(cannot encode: %v)\n", err)
		return
	}
	w.Write(b)
	w.WriteByte('\n')
}

func (b *Bundle) infoProbe(_ context.Context, w *bytes.Buffer) error {
	if b.cfg.Info == nil {
		return errSkip{"no /api/info source"}
	}
	raw := b.cfg.Info.Result(info.Available(false), false)
	if err := json.Indent(w, raw, "", "  "); err != nil {
		w.Write(raw)
	}
	w.WriteByte('\n')
	h := b.cfg.Info.Hardware()
	b.setFacts(func(f *facts) { f.hw = &h })
	return nil
}

// journalText is what the bundle's journal files are made from: the
// service's (or the kernel's) entries as journalctl prints them, with the
// journal's own arguments (package journal).
func (b *Bundle) journalText(q journal.Query) []string {
	q.Output = "short-iso-precise"
	return b.journal.Args(q)
}

// journalFile writes the service's entries of a boot (journalctl's offset:
// 0 this one, -1 the one before), the last 20000 lines at most.
func (b *Bundle) journalFile(ctx context.Context, w *bytes.Buffer, boot string) error {
	return b.journalctl(ctx, w, b.journalText(journal.Query{Units: true, Lines: 20000, Boot: boot}))
}

// journalctl runs journalctl; "no entries" answers are not failures
// (journal.Classify tells them).
func (b *Bundle) journalctl(ctx context.Context, w *bytes.Buffer, args []string) error {
	var out bytes.Buffer
	err := command(ctx, &out, b.cfg.Journal.Journalctl, args...)
	w.Write(out.Bytes())
	if err == nil && bytes.Count(out.Bytes(), []byte("\n")) <= 1 {
		w.WriteString("(no entries)\n")
	}
	if err != nil && ctx.Err() == nil && journal.NoEntries(journal.Classify(out.String())) {
		w.WriteString("(no entries)\n")
		return nil
	}
	return err
}

// authProbe writes how many authentication attempts failed in the last
// hour, as the daemon counted them (Config.Auth), then the service's
// warnings and errors of that hour, among them the failures' own lines.
func (b *Bundle) authProbe(ctx context.Context, w *bytes.Buffer) error {
	since := b.now.Add(-time.Hour)
	if b.cfg.Auth != nil {
		n := b.cfg.Auth.FailuresSince(since)
		fmt.Fprintf(w, "%d failed authentication attempts since %s (the daemon's count)\n", n, since.Format(time.RFC3339))
		b.setFacts(func(f *facts) { f.failedLogins = &n })
	} else {
		w.WriteString("failed authentication attempts: not counted here; the daemon counts them, and its bundle (GET /api/diagnostics) says how many\n")
	}
	section(w, "the service's warnings and errors of the last hour")
	return b.journalctl(ctx, w, b.journalText(journal.Query{Units: true, Since: since, Boot: "0", Priority: "warning"}))
}

func (b *Bundle) kernelProbe(ctx context.Context, w *bytes.Buffer) error {
	err := b.journalctl(ctx, w, b.journalText(journal.Query{Dmesg: true, Lines: 5000, Boot: "0"}))
	if err != nil && b.live() && ctx.Err() == nil {
		// Without a journal, the kernel's ring buffer.
		w.WriteByte('\n')
		if derr := command(ctx, w, "dmesg", "--ctime"); derr == nil {
			return nil
		}
	}
	return err
}

func (b *Bundle) usbProbe(ctx context.Context, w *bytes.Buffer) error {
	section(w, "gadget state (as /api/info hw.usb)")
	u, uerr := b.cfg.FS.USB()
	writeJSON(w, u)
	if uerr != nil {
		fmt.Fprintf(w, "error: %v\n", uerr)
	}
	section(w, "USB device controllers (/sys/class/udc)")
	ferr := b.files(ctx, w, "sys/class/udc/*/state", "sys/class/udc/*/current_speed", "sys/class/udc/*/maximum_speed", "sys/class/udc/*/function")
	section(w, "configfs (/sys/kernel/config/usb_gadget)")
	terr := b.tree(ctx, w, "sys/kernel/config/usb_gadget")
	return errors.Join(uerr, ferr, terr)
}

func (b *Bundle) videoProbe(ctx context.Context, w *bytes.Buffer) error {
	var errs []error
	section(w, "capture state and timings (as /api/info hw.video)")
	v, err := hw.ReadVideo(b.cfg.FS, b.cfg.V4L2)
	if hw.Absent(err) {
		w.WriteString("no capture device\n")
	} else {
		writeJSON(w, v)
		if err != nil {
			fmt.Fprintf(w, "error: %v\n", err)
		}
	}
	section(w, "V4L2 devices (/sys/class/video4linux)")
	devs, err := b.cfg.FS.VideoDevices()
	writeJSON(w, devs)
	if err != nil && !hw.Absent(err) {
		errs = append(errs, err)
	}
	section(w, "media controllers and sub-devices")
	media, err := b.cfg.FS.MediaDevices()
	writeJSON(w, media)
	if err != nil && !hw.Absent(err) {
		errs = append(errs, err)
	}
	subs, err := b.cfg.FS.SubDevices()
	writeJSON(w, subs)
	if err != nil && !hw.Absent(err) {
		errs = append(errs, err)
	}
	for _, d := range devs {
		if d.Kind() != "capture" {
			continue
		}
		if f, err := b.cfg.V4L2.Format(b.cfg.FS.Path(strings.TrimPrefix(d.Node, "/"))); err == nil {
			section(w, "format of "+d.Node)
			writeJSON(w, f)
		}
	}
	return errors.Join(errs...)
}

func (b *Bundle) gpioProbe(ctx context.Context, w *bytes.Buffer) error {
	section(w, "the board's named pins (as /api/info hw.gpio)")
	if b.cfg.Info != nil {
		writeJSON(w, b.cfg.Info.Hardware().GPIO)
	} else {
		w.WriteString("no /api/info source\n")
	}
	section(w, "GPIO chips")
	err := b.files(ctx, w, "sys/bus/gpio/devices/*/of_node/name", "sys/class/gpio/gpiochip*/label", "sys/class/gpio/gpiochip*/ngpio", "sys/class/gpio/gpiochip*/base")
	if b.live() {
		section(w, "line states (/sys/kernel/debug/gpio)")
		if derr := b.files(ctx, w, "sys/kernel/debug/gpio"); derr != nil {
			fmt.Fprintf(w, "(debugfs: %v)\n", derr) // root only; not a failure
		}
	}
	return err
}

func (b *Bundle) throttlingProbe(ctx context.Context, w *bytes.Buffer) error {
	section(w, "throttling now and since boot, and the source that told (as /api/info hw.health.throttling)")
	if b.cfg.Info != nil {
		writeJSON(w, b.cfg.Info.Hardware().Health.Throttling)
	} else {
		w.WriteString("no /api/info source\n")
	}
	section(w, "raw sources")
	err := b.files(ctx, w, "sys/devices/platform/soc/soc:firmware/get_throttled", "sys/class/hwmon/*/name", "sys/class/hwmon/*/in0_lcrit_alarm",
		"sys/class/thermal/thermal_zone*/type", "sys/class/thermal/thermal_zone*/temp")
	section(w, "history: kernel messages of this boot about voltage and throttling")
	var out bytes.Buffer
	kerr := b.journalctl(ctx, &out, b.journalText(journal.Query{Dmesg: true, Boot: "0"}))
	n := 0
	for line := range strings.SplitSeq(out.String(), "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "voltage") || strings.Contains(l, "throttl") || strings.Contains(l, "thermal") {
			w.WriteString(line + "\n")
			n++
		}
	}
	if kerr != nil {
		fmt.Fprintf(w, "(kernel messages: %v)\n", kerr)
	} else if n == 0 {
		w.WriteString("(none)\n")
	}
	return err
}

func (b *Bundle) networkProbe(ctx context.Context, w *bytes.Buffer) error {
	section(w, "interfaces (/sys/class/net)")
	err := b.files(ctx, w, "sys/class/net/*/address", "sys/class/net/*/operstate", "sys/class/net/*/carrier",
		"sys/class/net/*/mtu", "sys/class/net/*/speed")
	section(w, "addresses and routes (/proc/net)")
	perr := b.files(ctx, w, "proc/net/if_inet6", "proc/net/route", "proc/net/ipv6_route", "etc/resolv.conf", "etc/hosts")
	if !b.live() {
		return errors.Join(err, perr)
	}
	section(w, "ip")
	var cerrs []error
	for _, args := range [][]string{{"-details", "address", "show"}, {"route", "show", "table", "all"}, {"-6", "route", "show"}} {
		if cerr := command(ctx, w, "ip", args...); cerr != nil {
			cerrs = append(cerrs, cerr)
		}
	}
	return errors.Join(append(cerrs, err, perr)...)
}

func (b *Bundle) systemdProbe(ctx context.Context, w *bytes.Buffer) error {
	if !b.live() {
		return errNotLive
	}
	var errs []error
	units := b.cfg.Journal.Units
	for _, args := range [][]string{
		{"--no-pager", "--failed"},
		append([]string{"--no-pager", "status", "--lines=0"}, units...),
		{"--no-pager", "list-units", "--all", "--plain"},
		{"--no-pager", "list-timers", "--all"},
	} {
		if err := command(ctx, w, "systemctl", args...); err != nil {
			var xe *exec.ExitError
			if !errors.As(err, &xe) { // status exits 3 for an inactive unit
				errs = append(errs, err)
			}
		}
		w.WriteByte('\n')
	}
	return errors.Join(errs...)
}

func (b *Bundle) diskProbe(ctx context.Context, w *bytes.Buffer) error {
	section(w, "memory (/proc/meminfo)")
	err := b.files(ctx, w, "proc/meminfo", "proc/swaps", "proc/loadavg")
	section(w, "mounts (/proc/mounts)")
	merr := b.files(ctx, w, "proc/mounts")
	if !b.live() {
		return errors.Join(err, merr)
	}
	section(w, "space")
	full, serr := diskUse(w)
	b.setFacts(func(f *facts) { f.fullDisks = full })
	return errors.Join(err, merr, serr)
}

func (b *Bundle) clockProbe(ctx context.Context, w *bytes.Buffer) error {
	fmt.Fprintf(w, "bundle made at %s (UTC)\n", b.now.Format(time.RFC3339))
	if !b.live() {
		return errNotLive
	}
	synced, detail, err := clockSynced()
	w.WriteString(detail)
	if err != nil {
		return err
	}
	b.setFacts(func(f *facts) { f.clockSynced = &synced })
	// timedatectl adds the NTP service's view; without systemd there is
	// none, and the kernel's answer above stands.
	if err := command(ctx, w, "timedatectl", "show"); err != nil && ctx.Err() != nil {
		return err
	}
	return nil
}

func (b *Bundle) versionsProbe(ctx context.Context, w *bytes.Buffer) error {
	fmt.Fprintf(w, "kvmd: %s\ngo: %s %s/%s\n", b.cfg.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	k, kerr := b.cfg.FS.Kernel()
	fmt.Fprintf(w, "kernel: %s %s %s %s\n", k.System, k.Release, k.Version, k.Machine)
	if d, err := b.cfg.FS.Uptime(); err == nil {
		fmt.Fprintf(w, "uptime: %v\n", d.Round(time.Second))
	}
	section(w, "system")
	err := b.files(ctx, w, "etc/os-release", "proc/device-tree/model", "proc/device-tree/compatible", "proc/sys/kernel/random/boot_id",
		"etc/kvmd/*version*", "boot/firmware/issue.txt", "boot/issue.txt")
	if kerr != nil && !hw.Absent(kerr) {
		err = errors.Join(kerr, err)
	}
	return err
}

// processNames are the programs whose command lines go in the bundle: the
// service's and those it works with. Other processes' command lines are
// none of the support engineer's business.
var processNames = []string{"kvmd", "ustreamer", "janus", "nginx", "systemd-journal"}

func (b *Bundle) processesProbe(ctx context.Context, w *bytes.Buffer) error {
	dirs, _ := b.cfg.FS.Glob("proc/[0-9]*")
	slices.SortFunc(dirs, func(a, b string) int { return pidOf(a) - pidOf(b) })
	for _, d := range dirs {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		raw, err := b.readFile(ctx, d+"/cmdline", 16<<10)
		if err != nil || len(raw) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		prog := path.Base(args[0])
		if !slices.ContainsFunc(processNames, func(n string) bool { return strings.HasPrefix(prog, n) }) {
			continue
		}
		fmt.Fprintf(w, "%d %s\n", pidOf(d), strings.Join(args, " "))
	}
	return nil
}

func pidOf(dir string) int {
	n, _ := strconv.Atoi(path.Base(dir))
	return n
}

// envKept are the environment variables whose values are shown; of the
// others only the name is (a value may be a secret).
var envKept = []string{"LANG", "LANGUAGE", "LC_ALL", "TZ", "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM",
	"INVOCATION_ID", "JOURNAL_STREAM", "NOTIFY_SOCKET", "WATCHDOG_USEC", "LISTEN_FDS", "LISTEN_FDNAMES", "SYSTEMD_EXEC_PID"}

func (b *Bundle) environmentProbe(_ context.Context, w *bytes.Buffer) error {
	w.WriteString("# the environment of the process that made this bundle\n")
	env := os.Environ()
	slices.Sort(env)
	var hidden []string
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if !slices.Contains(envKept, k) && !strings.HasPrefix(k, "LC_") {
			hidden = append(hidden, k)
			continue
		}
		fmt.Fprintf(w, "%s=%s\n", k, v)
	}
	w.WriteString("\n# set, values not shown (a value may be a secret):\n")
	for _, k := range hidden {
		fmt.Fprintf(w, "%s\n", k)
	}
	return nil
}

func (b *Bundle) configProbe(_ context.Context, w *bytes.Buffer) error {
	if b.cfg.Settings == nil {
		return errSkip{"no configuration given"}
	}
	w.WriteString("# the effective configuration: defaults, the config file and the flags\n")
	w.Write(b.cfg.Settings)
	return nil
}
