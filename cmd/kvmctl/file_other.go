//go:build !unix

package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// updateFile rewrites the file at path through fn: a temporary file renamed
// over it. Without flock, two kvmctl storing sessions at the same moment
// may lose one of them.
func updateFile(path string, perm fs.FileMode, fn func(old []byte) ([]byte, error)) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	data, err := fn(old)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
	return err
}

// othersMayAccess is false: permission bits do not describe who may read
// a file here (Windows ACLs); the user profile's directories are private.
func othersMayAccess(fi fs.FileInfo) bool { return false }
