// Package brcheck checks a Buildroot BR2_EXTERNAL tree without building
// anything, since a full image build needs the network: the tree's
// external.desc, Config.in and external.mk, each package's Config.in and
// .mk (variables Buildroot reads, hooks that exist, one infrastructure
// call at the end), and the defconfigs (syntax, files they name, the
// external's own symbols). Given a Buildroot source tree as well, it
// checks every option the defconfigs set against that release's Kconfig
// files (the option exists, is not a legacy one, and the value fits its
// type), the Buildroot-relative files they name, the release against the
// one the tree pins, and the Go toolchain against each Go package's go.mod.
package brcheck

import "fmt"

// A Problem is one thing wrong with the tree, at a file and line (Line 0:
// the whole file).
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// problems collects Problems with paths relative to the tree checked.
type problems struct {
	list []Problem
}

func (ps *problems) add(file string, line int, format string, args ...any) {
	ps.list = append(ps.list, Problem{File: file, Line: line, Msg: fmt.Sprintf(format, args...)})
}
