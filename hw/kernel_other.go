//go:build !linux

package hw

import (
	"fmt"
	"io/fs"
)

// unameMachine has nothing to ask outside Linux.
func unameMachine() (string, error) {
	return "", fmt.Errorf("hw: uname machine: %w", fs.ErrNotExist)
}
