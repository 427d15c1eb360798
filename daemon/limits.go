package daemon

import (
	"fmt"
	"log/slog"
	"syscall"
)

// fdsPerFollower is what one /api/log follower holds open: journalctl's
// pipe ends and its process.
const fdsPerFollower = 4

// FilesNeeded is how many files the daemon may hold with every cap
// reached: the connections, the log followers, and a margin for
// listeners, the files it re-reads and the runtime's own.
func (c Config) FilesNeeded() uint64 {
	return uint64(c.MaxConnections + c.LogFollowers*fdsPerFollower + 64)
}

// checkFileLimit warns when the open-file limit is below what the caps
// need: accept would then fail with EMFILE before --max-connections is
// reached, and net/http retries it with growing pauses, holding every
// new connection back.
func checkFileLimit(cfg Config, log *slog.Logger) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return
	}
	if msg := fileLimitWarning(lim.Cur, cfg); msg != "" {
		log.Warn(msg, "limit", lim.Cur, "need", cfg.FilesNeeded())
	}
}

func fileLimitWarning(limit uint64, cfg Config) string {
	if limit >= cfg.FilesNeeded() {
		return ""
	}
	return fmt.Sprintf("open-file limit below what --max-connections %d and --log-followers %d need: "+
		"raise LimitNOFILE= or lower --max-connections", cfg.MaxConnections, cfg.LogFollowers)
}
