package main

import (
	"bytes"

	"kvmd/internal/benchmd"
)

// withKeptSection returns report followed by the sections of the file at
// path that tests write and kvmbench does not measure (the booted system's,
// imagetest/bench_test.go; the revocation of open streams,
// cmd/kvmd/revoke_e2e_test.go), kept as they are when it rewrites the file.
func withKeptSection(path string, report []byte) ([]byte, error) {
	kept, err := benchmd.Kept(path)
	if err != nil || kept == nil {
		return report, err
	}
	out := append(bytes.TrimRight(report, "\n"), "\n\n"...)
	out = append(out, kept...)
	return append(out, '\n'), nil
}
