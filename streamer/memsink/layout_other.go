//go:build !amd64 && !arm64 && !arm

package memsink

// native is unknown here: Open answers ErrUnsupported.
var native layout
