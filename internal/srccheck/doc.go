// Package srccheck holds tests of rules about the daemon's own source that
// the compiler and the linters do not check: errors are decided with
// errors.Is/As, never by their text; what another program prints
// (journalctl) is read in one place; one package's log wording is no
// interface of another.
package srccheck
