//go:build !linux

package hw

import (
	"fmt"
	"io/fs"
)

// VCIO is the firmware's property interface through the kernel's vcio
// device, which exists on Linux only: elsewhere there is none.
type VCIO struct {
	Nodes []string
}

var _ Mailbox = VCIO{}

// Call implements Mailbox: there is no vcio device.
func (VCIO) Call([]uint32) error {
	return fmt.Errorf("no vcio device: %w", fs.ErrNotExist)
}
