package writer

import (
	"context"
	"sync"
	"time"
)

// confirmTimeout bounds one shared last-stable-offset request; each read
// still gives up at its own context's end.
const confirmTimeout = 5 * time.Second

// coalescer shares calls of fn among concurrent callers. A caller waits for
// the next call that starts after it arrived — never for the answer to a
// call already under way, which may predate a write acknowledged before
// the caller arrived — and one call answers every caller that arrived
// before it started: with a call in flight, every caller arriving
// meanwhile shares the one call that follows it.
type coalescer[T any] struct {
	fn func(context.Context) (T, error)

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

func newCoalescer[T any](fn func(context.Context) (T, error)) *coalescer[T] {
	return &coalescer[T]{fn: fn}
}

// do returns the answer of a call of fn that started after do was called.
func (c *coalescer[T]) do(ctx context.Context) (T, error) {
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
func (c *coalescer[T]) run(ctx context.Context, f *flight[T]) {
	for f != nil {
		cctx, cancel := context.WithTimeout(ctx, confirmTimeout)
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
