// Command kvmbench is the benchmark driver behind `make bench`.
//
// It measures kvmd against a bare net/http baseline in the same run:
// closed-loop load over keep-alive connections, several rounds with the
// scenario order rotated each round, medians over rounds. It also measures
// start-to-listening time, idle RSS and binary size, the same for the ARM
// builds under qemu-user against a cross-built baseline, and can write the
// result as BENCHMARKS.md. With Chromium it also times the loads of the
// web UI's pages against a bare page from the baseline server.
//
// Usage:
//
//	kvmbench run --kvmd PATH [--rounds 5] [--duration 3s] [--conns 4] [--ui-loads 20] [--arm-dir dist] [--out BENCHMARKS.md]
//	kvmbench run --kvmd PATH --arm-dir dist --only qemu
//	kvmbench run --kvmd PATH [--ui-loads 20] --only ui
//	kvmbench run --kvmd PATH --only diag
//	kvmbench run --kvmd PATH [--cpu-rounds 7] [--cpu-requests 30000] --only load
//	kvmbench run --kvmd PATH --only video
//	kvmbench baseline --listen 127.0.0.1:PORT
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli(ctx, os.Args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  kvmbench run --kvmd PATH [--rounds N] [--duration D] [--warmup D] [--conns N] [--ui-loads N] [--arm-dir DIR] [--out FILE]
  kvmbench run --kvmd PATH --arm-dir DIR --only qemu
  kvmbench run --kvmd PATH [--ui-loads N] --only ui
  kvmbench run --kvmd PATH --only diag
  kvmbench run --kvmd PATH [--cpu-rounds N] [--cpu-requests N] --only load
  kvmbench run --kvmd PATH [--msd-mib N] --only msd
  kvmbench run --kvmd PATH --only video
  kvmbench baseline --listen 127.0.0.1:PORT
`

// cli runs the subcommand named in args[1] and returns the exit status.
func cli(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 2 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[1] {
	case "run":
		cfg, err := parseRunFlags(args[2:], stderr)
		if err != nil {
			return 2
		}
		cfg.CommandLine = shellJoin(args)
		cfg.ViaMake = os.Getenv("MAKELEVEL") != ""
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "kvmbench: locating own executable: %v\n", err)
			return 1
		}
		cfg.Self = self
		cfg.ARMBaselineDir = filepath.Dir(self)
		if err := run(ctx, cfg, stdout, stderr); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintf(stderr, "kvmbench: interrupted; servers stopped, temporary files removed\n")
				return 130
			}
			fmt.Fprintf(stderr, "kvmbench: %v\n", err)
			return 1
		}
		return 0
	case "baseline":
		fs := flag.NewFlagSet("baseline", flag.ContinueOnError)
		fs.SetOutput(stderr)
		listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback only)")
		bodies := map[string][]byte{}
		fs.Func("route", "answer GET `PATH=FILE` with the file's bytes as JSON (repeatable)", func(v string) error {
			path, file, ok := strings.Cut(v, "=")
			if !ok || !strings.HasPrefix(path, "/") {
				return fmt.Errorf("want PATH=FILE, got %q", v)
			}
			b, err := os.ReadFile(file)
			bodies[path] = b
			return err
		})
		if err := fs.Parse(args[2:]); err != nil {
			return 2
		}
		if err := serveBaseline(ctx, *listen, bodies); err != nil {
			fmt.Fprintf(stderr, "kvmbench baseline: %v\n", err)
			return 1
		}
		return 0
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "kvmbench: unknown command %q\n%s", args[1], usage)
		return 2
	}
}

func parseRunFlags(args []string, stderr io.Writer) (runConfig, error) {
	cfg := defaultRunConfig()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.KVMD, "kvmd", "", "path of the kvmd binary under test (required)")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds; every scenario runs once per round")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "measured time per scenario and round")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "uncounted warm-up before each measurement")
	fs.IntVar(&cfg.Conns, "conns", cfg.Conns, "keep-alive connections per scenario")
	fs.IntVar(&cfg.CPURounds, "cpu-rounds", cfg.CPURounds, "rounds of the CPU-per-request pairs, kvmd's and its baseline's (0: none)")
	fs.IntVar(&cfg.CPURequests, "cpu-requests", cfg.CPURequests, "requests per CPU-per-request measurement")
	fs.StringVar(&cfg.GoBench, "go-bench", "", "report the allocations per request of this `go test -bench -benchmem` output (BenchmarkRequest of package httpd)")
	fs.StringVar(&cfg.GoBenchBefore, "go-bench-before", "", "and compare them with this earlier output of the same benchmark")
	fs.StringVar(&cfg.Out, "out", "", "also write the report as a markdown file (e.g. BENCHMARKS.md)")
	fs.IntVar(&cfg.LogEntries, "log-entries", cfg.LogEntries, "journal entries for the /api/log seek rows (0: no log rows)")
	fs.IntVar(&cfg.LogSamples, "log-samples", cfg.LogSamples, "entries timed through a /api/log follow")
	fs.StringVar(&cfg.ARMDir, "arm-dir", "", "measure the ARM builds DIR/kvmd-linux-{armv6,armv7,arm64} under qemu-user,\n"+
		"against kvmbench-linux-ARCH beside this binary (make bench builds both)")
	fs.StringVar(&cfg.Release, "release", "", "the release build of kvmd whose size to report (default: --kvmd, which must have --demo)")
	fs.StringVar(&cfg.ReleaseDir, "release-dir", "", "where the release builds kvmd-linux-ARCH whose sizes to report are (default: --arm-dir)")
	fs.IntVar(&cfg.UILoads, "ui-loads", cfg.UILoads, "counted loads of each web UI page in headless Chromium (0: no web UI rows)")
	fs.IntVar(&cfg.WSClients, "ws-clients", cfg.WSClients, "/api/ws clients connected at once (0: no /api/ws rows)")
	fs.IntVar(&cfg.WSSamples, "ws-samples", cfg.WSSamples, "power clicks timed through /api/ws")
	fs.BoolVar(&cfg.Stress, "stress", cfg.Stress, "measure idle connections, logins under a wrong-password flood, and one viewer token's streams beside an admin (\"Under load\")")
	fs.BoolVar(&cfg.Attack, "attack", cfg.Attack, "measure unauthenticated bodies, a print's memory, revocation of a password's streams and one viewer's long requests beside an admin (\"Under attack\")")
	fs.BoolVar(&cfg.MSD, "msd", cfg.MSD, "measure a virtual media upload against cat+sync (\"Virtual media upload\")")
	fs.IntVar(&cfg.MSDMiB, "msd-mib", cfg.MSDMiB, "the image's size for the virtual media upload, MiB")
	fs.BoolVar(&cfg.Video, "video", cfg.Video, "measure the picture through MJPEG, Direct H.264 and WebRTC: latency, bitrate, CPU, memory (needs ffmpeg)")
	fs.StringVar(&cfg.Only, "only", "", `"qemu": run only the qemu measurements and print them (needs --arm-dir, no --out);`+"\n"+
		`"ui": only the web UI page loads (no --out); "ws": only the /api/ws rows (no --out); "stress": only the "Under load" section (no --out);`+"\n"+
		`"attack": only the "Under attack" section (no --out);`+"\n"+
		`"diag": only the diagnostics bundle row (no --out); "msd": only the virtual media upload (no --out); "video": only the picture's rows (no --out);`+"\n"+
		`"load": only the load rows and the CPU per request (no --out)`)
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	var bad []string
	if cfg.KVMD == "" {
		bad = append(bad, "--kvmd is required")
	}
	if fs.NArg() > 0 {
		bad = append(bad, fmt.Sprintf("unexpected arguments %q", fs.Args()))
	}
	if cfg.Rounds < 1 || cfg.Rounds > 100 {
		bad = append(bad, "--rounds must be 1..100")
	}
	if cfg.Conns < 1 || cfg.Conns > 256 {
		bad = append(bad, "--conns must be 1..256")
	}
	if cfg.Duration < 10*time.Millisecond || cfg.Duration > 10*time.Minute {
		bad = append(bad, "--duration must be 10ms..10m")
	}
	if cfg.Warmup < 0 || cfg.Warmup > time.Minute {
		bad = append(bad, "--warmup must be 0..1m")
	}
	if cfg.WSClients < 0 || cfg.WSClients > 1000 || cfg.WSSamples < 0 || cfg.WSSamples > 1000 {
		bad = append(bad, "--ws-clients and --ws-samples must be 0..1000")
	}
	if cfg.CPURounds < 0 || cfg.CPURounds > 100 || cfg.CPURequests < 1 || cfg.CPURequests > 10_000_000 {
		bad = append(bad, "--cpu-rounds must be 0..100 and --cpu-requests 1..10000000")
	}
	if cfg.MSDMiB < 1 || cfg.MSDMiB > 64<<10 {
		bad = append(bad, "--msd-mib must be 1..65536")
	}
	if cfg.UILoads < 0 || cfg.UILoads > 1000 {
		bad = append(bad, "--ui-loads must be 0..1000")
	}
	switch cfg.Only {
	case "":
	case "qemu":
		if cfg.ARMDir == "" || cfg.Out != "" {
			bad = append(bad, "--only qemu needs --arm-dir and does not write --out")
		}
	case "ui":
		if cfg.UILoads == 0 || cfg.Out != "" {
			bad = append(bad, "--only ui needs --ui-loads above 0 and does not write --out")
		}
	case "ws":
		if cfg.WSClients == 0 || cfg.WSSamples == 0 || cfg.Out != "" {
			bad = append(bad, "--only ws needs --ws-clients and --ws-samples above 0 and does not write --out")
		}
	case "stress", "attack", "diag", "msd", "load", "video":
		if cfg.Out != "" {
			bad = append(bad, "--only "+cfg.Only+" does not write --out")
		}
	default:
		bad = append(bad, fmt.Sprintf("--only %q: the parts that run alone are qemu, ui, ws, stress, attack, diag, msd, load and video", cfg.Only))
	}
	if len(bad) > 0 {
		fmt.Fprintf(stderr, "kvmbench run: %s\n%s", strings.Join(bad, "; "), usage)
		return cfg, errors.New("bad flags")
	}
	return cfg, nil
}

// shellJoin quotes args so the line can be pasted back into a POSIX shell.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,+@%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
