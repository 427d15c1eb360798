package daemon

import (
	"strings"
	"testing"
)

func TestFileLimitWarning(t *testing.T) {
	cfg := DefaultConfig()
	if w := fileLimitWarning(2048, cfg); w != "" {
		t.Errorf("the unit's limit with the defaults: %q", w)
	}
	if w := fileLimitWarning(1024, cfg); !strings.Contains(w, "--max-connections 1024") {
		t.Errorf("1024 files for 1024 connections: %q, want a warning", w)
	}
}
