package testenv

import (
	"errors"
	"testing"
	"time"
)

// pollEvery is how often WaitFor and WaitForNil ask again.
const pollEvery = 10 * time.Millisecond

// errStillFalse is what WaitFor reports of a condition that never held.
var errStillFalse = errors.New("the condition still does not hold")

// WaitFor polls cond until it holds, failing the test, which names what it
// waited for, once timeout has passed. cond runs on the test's goroutine
// and may fail the test itself.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	WaitForNil(tb, timeout, what, func() error {
		if cond() {
			return nil
		}
		return errStillFalse
	})
}

// WaitForNil polls check until it returns nil, failing the test, which
// names what it waited for and check's last error, once timeout has
// passed. check runs on the test's goroutine and may fail the test
// itself.
func WaitForNil(tb testing.TB, timeout time.Duration, what string, check func() error) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(pollEvery)
	}
}
