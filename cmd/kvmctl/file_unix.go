//go:build unix

package main

import (
	"io/fs"

	"kvmd/internal/atomicfile"
)

// updateFile rewrites the file at path through fn, atomically and under a
// lock (see atomicfile.Update).
func updateFile(path string, perm fs.FileMode, fn func(old []byte) ([]byte, error)) error {
	return atomicfile.Update(path, perm, fn)
}

// othersMayAccess tells whether the file's mode lets anyone but its owner
// at it.
func othersMayAccess(fi fs.FileInfo) bool { return fi.Mode().Perm()&0o077 != 0 }
