//go:build !linux

package msd

import (
	"errors"
	"os"
)

// The daemon runs on Linux; elsewhere the storage builds but has no file
// system to report and writes without the Linux-only refinements.

const wOK = 2

func access(path string, mode uint32) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o200 == 0 {
		return os.ErrPermission
	}
	return nil
}

func statFS(string) (Part, error) { return Part{}, errors.ErrUnsupported }

func preallocate(*os.File, int64) error { return nil }

func startWriteback(*os.File, int64, int64) {}

func waitWriteback(*os.File, int64, int64) {}

func renameNoReplace(oldpath, newpath string) error {
	if _, err := os.Lstat(newpath); err == nil {
		return ErrImageExists
	}
	return os.Rename(oldpath, newpath)
}

func syncDir(string) error { return nil }
