package testenv

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// stopTimeout is how long a Running may take to return once cancelled.
const stopTimeout = 30 * time.Second

// Running is a Run(ctx) of a service (a writer, a projector, an auditor,
// a command's run) in the background of a test.
type Running struct {
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	err    error       // what run returned, once done is closed
	taken  atomic.Bool // Stop or Wait handed err to the test
}

// RunUntilCleanup runs run in a goroutine until the test ends. At cleanup
// it cancels run's context and waits for run to return; the test fails
// when run does not return within 30 seconds, or returns an error that
// Stop or Wait did not hand to the test: a service is expected to return
// nil when cancelled.
func RunUntilCleanup(tb testing.TB, name string, run func(context.Context) error) *Running {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{name: name, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(stopTimeout):
			tb.Errorf("%s did not return within %v of the end of the test", name, stopTimeout)
			return
		}
		if r.err != nil && !r.taken.Load() {
			tb.Errorf("%s: %v", name, r.err)
		}
	})
	return r
}

// Done is closed once run has returned.
func (r *Running) Done() <-chan struct{} { return r.done }

// Stop cancels run's context and returns what run returned; the test
// fails when run does not return within 30 seconds. The error is the
// test's to judge: cleanup does not report it again.
func (r *Running) Stop(tb testing.TB) error {
	tb.Helper()
	r.cancel()
	return r.Wait(tb, stopTimeout)
}

// Wait returns what run returned once it returns by itself; the test
// fails when it does not within timeout. The error is the test's to
// judge: cleanup does not report it again.
func (r *Running) Wait(tb testing.TB, timeout time.Duration) error {
	tb.Helper()
	select {
	case <-r.done:
		r.taken.Store(true)
		return r.err
	case <-time.After(timeout):
		tb.Fatalf("%s did not return within %v", r.name, timeout)
		return nil
	}
}
