//go:build arm || arm64

package main

import (
	"context"
	"errors"
)

// errNoBrowser says why the ARM builds have no web UI rows (browser.go).
var errNoBrowser = errors.New("this build of kvmbench has no browser driver (the ARM builds are the bare qemu baseline)")

func findBrowser() (string, error) { return "", errNoBrowser }

type pageLoader struct{ product string }

func newPageLoader(context.Context, string, string, string) (*pageLoader, error) {
	return nil, errNoBrowser
}

func (*pageLoader) load(string, string) (uiSample, error) { return uiSample{}, errNoBrowser }

func (*pageLoader) session(bool) error { return errNoBrowser }

func (*pageLoader) Close() {}
