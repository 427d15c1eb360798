package main

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
)

// The section of BENCHMARKS.md that the booted-system test writes
// (imagetest/bench_test.go): kvmbench does not measure it, and keeps it
// when it rewrites the file.
const (
	keptBegin = "<!-- imagetest:begin -->"
	keptEnd   = "<!-- imagetest:end -->"
)

// withKeptSection returns report followed by the kept section of the file
// at path, when the file has one.
func withKeptSection(path string, report []byte) ([]byte, error) {
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return report, nil
	}
	if err != nil {
		return nil, err
	}
	i := bytes.Index(old, []byte(keptBegin))
	j := bytes.Index(old, []byte(keptEnd))
	if i < 0 || j < i {
		return report, nil
	}
	out := append(bytes.TrimRight(report, "\n"), "\n\n"...)
	out = append(out, old[i:j+len(keptEnd)]...)
	return append(out, '\n'), nil
}
