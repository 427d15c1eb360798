//go:build !linux

package diag

import (
	"bytes"
	"errors"
)

var errNotLinux = errors.New("not on Linux")

func clockSynced() (bool, string, error) { return false, "", errNotLinux }

func diskUse(*bytes.Buffer) ([]string, error) { return nil, errNotLinux }
