// Package coalesce shares the calls of a function among concurrent
// callers without ever answering a caller with a call that started
// before it arrived: the writer's reads of the brokers' last stable
// offsets and of the projector's stored offsets, which must postdate
// every write acknowledged before their caller arrived, cost one call
// per burst of callers instead of one each.
package coalesce

import (
	"context"
	"sync"
	"time"
)

// Coalescer shares calls of fn among concurrent callers. A caller waits for
// the next call that starts after it arrived — never for the answer to a
// call already under way, which may predate a write acknowledged before
// the caller arrived — and one call answers every caller that arrived
// before it started: with a call in flight, every caller arriving
// meanwhile shares the one call that follows it.
type Coalescer[T any] struct {
	fn func(context.Context) (T, error)
	// timeout bounds one call; each caller still gives up at its own
	// context's end.
	timeout time.Duration

	mu      sync.Mutex
	running bool       // a call is in flight
	next    *flight[T] // callers waiting for the call after the running one
}

// flight is one call of fn and the callers it answers.
type flight[T any] struct {
	done chan struct{} // closed once v and err are set
	v    T
	err  error
}

// New returns a coalescer of fn, each of whose calls gets a context
// bounded by timeout.
func New[T any](fn func(context.Context) (T, error), timeout time.Duration) *Coalescer[T] {
	return &Coalescer[T]{fn: fn, timeout: timeout}
}

// Do returns the answer of a call of fn that started after Do was called.
func (c *Coalescer[T]) Do(ctx context.Context) (T, error) {
	c.mu.Lock()
	var f *flight[T]
	if !c.running {
		c.running = true
		f = &flight[T]{done: make(chan struct{})}
		c.mu.Unlock()
		// The call belongs to every caller that joins it, so it does
		// not end with the context of the one that started it.
		go c.run(context.WithoutCancel(ctx), f)
	} else {
		if c.next == nil {
			c.next = &flight[T]{done: make(chan struct{})}
		}
		f = c.next
		c.mu.Unlock()
	}
	select {
	case <-f.done:
		return f.v, f.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// run calls fn for f, then for the flight callers joined meanwhile, until
// no one waits.
func (c *Coalescer[T]) run(ctx context.Context, f *flight[T]) {
	for f != nil {
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		f.v, f.err = c.fn(cctx)
		cancel()
		close(f.done)
		c.mu.Lock()
		// Taking next under the lock starts its call: anyone arriving
		// from now on joins a later flight.
		f, c.next = c.next, nil
		if f == nil {
			c.running = false
		}
		c.mu.Unlock()
	}
}
