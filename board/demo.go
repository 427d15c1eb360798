package board

import _ "embed"

// DemoArchive is the Raspberry Pi 4 fixture tree (a text archive, see
// package internal/fixture) that kvmd serve --demo reads as its root.
//
//go:embed testdata/rpi4.ttar
var DemoArchive []byte
