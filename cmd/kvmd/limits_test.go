package main

import (
	"strconv"
	"strings"
	"testing"

	"kvmd/daemon"
	"kvmd/httpd"
)

// Measured by make bench (BENCHMARKS.md, "idle connections" rows) on
// amd64; ARM builds are close, their pointers half the size.
const (
	idleRSS       = 16 << 20 // the daemon with no connection
	perTLSConn    = 40 << 10 // one idle TLS connection after its handshake
	perJournalctl = 2 << 20  // one journalctl following: ~1 MiB anonymous (its libraries and the journal's pages are file-backed, shared or reclaimable)
	// The children, in the unit's cgroup: ffmpeg, the software H.264
	// encoder, at 1080p (VmHWM 106 MiB, 66 MiB of it anonymous, measured
	// on the demo's picture), and ustreamer.
	encoderRSS   = 110 << 20
	ustreamerRSS = 20 << 20
)

// TestUnitLimitsFitDefaults: the unit caps the daemon's files and memory,
// above what the default --max-connections and --log-followers can use
// with the streamer and the H.264 encoder running.
// Without LimitNOFILE= the Go runtime raises the soft limit to the hard
// one (524288 under systemd), so 20,000 slow connections exhausted the
// machine instead of a cap.
func TestUnitLimitsFitDefaults(t *testing.T) {
	u := readUnit(t, "kvmd.service")
	def := daemon.DefaultConfig()
	nofile := u["Service"]["LimitNOFILE"]
	if len(nofile) != 1 {
		t.Fatalf("LimitNOFILE = %q, want one value", nofile)
	}
	n, err := strconv.Atoi(nofile[0])
	if err != nil {
		t.Fatalf("LimitNOFILE=%s: want one number (soft = hard)", nofile[0])
	}
	needFDs := int(def.FilesNeeded())
	if n < needFDs {
		t.Errorf("LimitNOFILE=%d, below the %d the defaults can open", n, needFDs)
	}
	if n > 4*needFDs {
		t.Errorf("LimitNOFILE=%d, far above the %d the defaults need: no cap", n, needFDs)
	}
	mm := u["Service"]["MemoryMax"]
	if len(mm) != 1 {
		t.Fatalf("MemoryMax = %q, want one value", mm)
	}
	limit := parseBytes(t, mm[0])
	need := int64(idleRSS + def.MaxConnections*perTLSConn + def.LogFollowers*perJournalctl + encoderRSS + ustreamerRSS)
	if limit < need {
		t.Errorf("MemoryMax=%s (%d MiB), below the %d MiB the defaults can use", mm[0], limit>>20, need>>20)
	}
	if limit > 256<<20 {
		t.Errorf("MemoryMax=%s: more than half a Zero W's 512 MB", mm[0])
	}
	if def.MaxConnections != httpd.DefaultMaxConns {
		t.Errorf("--max-connections defaults to %d, httpd to %d", def.MaxConnections, httpd.DefaultMaxConns)
	}
}

// parseBytes reads a systemd size: a number with an optional K, M or G.
func parseBytes(t *testing.T, s string) int64 {
	t.Helper()
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("size %q: %v", s, err)
	}
	return n * mult
}
