//go:build !linux

package auth

import "errors"

// watchDirs is inotify's, which only Linux has: the store polls instead.
func watchDirs(dirs []string, names map[string]bool) (<-chan struct{}, func(), error) {
	return nil, nil, errors.ErrUnsupported
}
