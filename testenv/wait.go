package testenv

import (
	"testing"
	"time"
)

// pollEvery is how often WaitFor asks again.
const pollEvery = 10 * time.Millisecond

// WaitFor polls cond until it holds, failing the test, which names what it
// waited for, once timeout has passed. cond runs on the test's goroutine
// and may fail the test itself.
func WaitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(pollEvery)
	}
}
