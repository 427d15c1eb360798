package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// goBench is the output of `go test -bench -benchmem`: for each benchmark
// (its GOMAXPROCS suffix taken off), the samples of each unit, in the
// order of the runs (-count).
type goBench struct {
	names   []string // in the order first seen
	samples map[string]map[string][]float64
	// comment is the file's own first lines starting with "#": where
	// an earlier output came from.
	comment []string
}

// readGoBench reads a file of `go test -bench` output.
func readGoBench(path string) (*goBench, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, err := parseGoBench(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}

// parseGoBench reads the benchmark lines of the Go benchmark format
// ("BenchmarkX-2  1000  123 ns/op  45 B/op  6 allocs/op"); other lines
// (goos:, PASS, ok ...) are skipped.
func parseGoBench(r io.Reader) (*goBench, error) {
	g := &goBench{samples: map[string]map[string][]float64{}}
	sc := bufio.NewScanner(r)
	head := true
	for sc.Scan() {
		line := sc.Text()
		if head && strings.HasPrefix(line, "#") {
			g.comment = append(g.comment, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		head = false
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		units := g.samples[name]
		if units == nil {
			units = map[string][]float64{}
			g.samples[name] = units
			g.names = append(g.names, name)
		}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("benchmark line %q: %w", line, err)
			}
			units[f[i+1]] = append(units[f[i+1]], v)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(g.names) == 0 {
		return nil, fmt.Errorf("no benchmark lines")
	}
	return g, nil
}

// median returns the median of benchmark name's samples in unit, or NaN.
func (g *goBench) median(name, unit string) float64 {
	if g == nil {
		return math.NaN()
	}
	return median(g.samples[name][unit])
}

// requestBench is the benchmark whose rows the report gives.
const requestBench = "BenchmarkRequest/"

// writeGoBench writes the allocations per request of BenchmarkRequest's
// rows, against before's when there is one.
func writeGoBench(w io.Writer, g, before *goBench) {
	if g == nil {
		return
	}
	bare := g.median(requestBench+"bare", "allocs/op")
	fmt.Fprintf(w, "| scenario | allocs per request | bytes per request | allocs beyond bare net/http |")
	if before != nil {
		fmt.Fprintf(w, " allocs before | bytes before |")
	}
	fmt.Fprintf(w, "\n|---|---:|---:|---:|")
	if before != nil {
		fmt.Fprintf(w, "---:|---:|")
	}
	fmt.Fprintln(w)
	for _, name := range g.names {
		short, ok := strings.CutPrefix(name, requestBench)
		if !ok {
			continue
		}
		allocs, bytes := g.median(name, "allocs/op"), g.median(name, "B/op")
		fmt.Fprintf(w, "| %s | %s | %s | %s |", short, fmtCount(allocs), fmtCount(bytes), fmtCount(allocs-bare))
		if before != nil {
			fmt.Fprintf(w, " %s | %s |", fmtCount(before.median(name, "allocs/op")), fmtCount(before.median(name, "B/op")))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func fmtCount(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	return strconv.FormatFloat(math.Round(v), 'f', -1, 64)
}

// goBenchMethod describes the allocations table.
func goBenchMethod(cfg runConfig, before *goBench) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Allocations per request** (Go's benchmark, `%s`): `BenchmarkRequest` in package httpd sends each row's request through the whole server "+
		"over a loopback keep-alive connection (the listener, net/http, the credential check, the handler, the access line through slog into the log buffer) "+
		"from a client that allocates nothing itself; `bare` is net/http alone answering the same bytes, as the baseline server does. Medians over the runs.",
		goBenchCommand)
	if before != nil {
		fmt.Fprintf(&b, " *Before* is the same benchmark's output in `%s`", cfg.GoBenchBefore)
		if len(before.comment) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(before.comment, " "))
		}
		b.WriteString(".")
	}
	b.WriteString("\n\n")
	return b.String()
}

// goBenchCommand is how make bench runs the benchmark (Makefile).
const goBenchCommand = "go test -run '^$' -bench '^BenchmarkRequest$' -benchmem -count 5 ./httpd/"
