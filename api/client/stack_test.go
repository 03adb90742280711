package client_test

import (
	"testing"

	"github.com/eskv/eskv/testenv/stack"
)

const (
	devToken    = stack.DevToken
	readerToken = stack.ReaderToken
)

func mustStack(tb testing.TB) string {
	tb.Helper()
	return stack.MustStart(tb)
}

func waitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	stack.WaitFor(tb, what, cond)
}
