package main

import (
	"strings"
	"testing"
	"time"
)

// TestAttackMarkdown: the section's rows pass and miss on their targets.
func TestAttackMarkdown(t *testing.T) {
	r := &attackResult{
		bodiesIdle: 16 << 20, bodiesPeak: 20 << 20, bodiesStatus: map[int]int{401: attackBodies},
		printsStatus: map[int]int{503: 10, 0: 1},
		printIdle:    16 << 20, printPeak: 30 << 20, printStatus: 409,
		revoke: map[string][]time.Duration{}, held: map[string][3]int{"ws": {16, 1, 0}, "follow": {5, 1, 0}, "video": {9, 0, 0}},
		loginAlone: 50 * time.Millisecond, loginBeside: 60 * time.Millisecond, adminWS: true, adminVideo: true,
	}
	for _, w := range attackWays {
		for range attackRounds {
			r.revoke[w.key] = append(r.revoke[w.key], 10*time.Millisecond)
		}
	}
	r.revoke["cmd-del"][3] = 600 * time.Millisecond
	var b strings.Builder
	writeAttack(&b, r)
	md := b.String()
	for _, want := range []string{
		"| 4 MiB | < 48 MiB | pass |",
		"| 240 × 401 | all 401 | pass |",
		"| 1 × none, 10 × 503 |",
		"| 14 MiB | < 8 MiB | MISS |", // the print's
		"| `kvmd user del op`, from the command's start | 10.0 ms | 600 ms | worst ≤ 500 ms | MISS |",
		"| `kvmd user set op --role viewer`, from the command's start | 10.0 ms | 10.0 ms | worst ≤ 500 ms | pass |",
		"| video streams (`/streamer/stream`) | 9 / 0 / 0 | 8 | MISS |",
		"| beside them, an admin logs in (alone: 50.0 ms) | 60.0 ms | < 1.00 s | pass |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("no %q in:\n%s", want, md)
		}
	}
}
