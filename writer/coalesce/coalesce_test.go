package coalesce

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeOffsets is an offset function whose calls block until released; each
// call answers its own sequence number (1, 2, ...).
type fakeOffsets struct {
	mu      sync.Mutex
	calls   int64
	release chan struct{}
}

func newFakeOffsets() *fakeOffsets { return &fakeOffsets{release: make(chan struct{})} }

func (f *fakeOffsets) fn(ctx context.Context) (int64, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	select {
	case <-f.release:
		return n, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

func (f *fakeOffsets) count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// get starts c.do in a goroutine and returns where its answer arrives.
func get(ctx context.Context, c *Coalescer[int64]) <-chan int64 {
	ch := make(chan int64, 1)
	go func() {
		v, err := c.Do(ctx)
		if err != nil {
			v = -1
		}
		ch <- v
	}()
	return ch
}

// bubble is a subtest in a synctest bubble with a fresh coalescer over
// fake offsets.
func bubble(test func(t *testing.T, f *fakeOffsets, c *Coalescer[int64])) func(*testing.T) {
	return func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFakeOffsets()
			test(t, f, New(f.fn, 5*time.Second))
		})
	}
}

func TestCoalescer(t *testing.T) {
	t.Run("OneCallServesEveryoneWhoArrivedBeforeIt", bubble(func(t *testing.T, f *fakeOffsets, c *Coalescer[int64]) {
		first := get(t.Context(), c)
		synctest.Wait() // call 1 in flight
		// Arrived while call 1 was in flight: all wait for call 2.
		var later []<-chan int64
		for range 10 {
			later = append(later, get(t.Context(), c))
		}
		synctest.Wait()
		if n := f.count(); n != 1 {
			t.Fatalf("%d calls in flight; want 1", n)
		}
		f.release <- struct{}{} // answers call 1
		if v := <-first; v != 1 {
			t.Fatalf("first caller got call %d; want 1", v)
		}
		synctest.Wait() // call 2 started for the ten waiting
		f.release <- struct{}{}
		for i, ch := range later {
			if v := <-ch; v != 2 {
				t.Fatalf("caller %d got call %d; want 2 (the first call that started after it arrived)", i, v)
			}
		}
		if n := f.count(); n != 2 {
			t.Fatalf("%d calls for 11 callers; want 2", n)
		}
	}))

	t.Run("NeverAnAnswerToACallSentBeforeArrival", bubble(func(t *testing.T, f *fakeOffsets, c *Coalescer[int64]) {
		a := get(t.Context(), c)
		synctest.Wait()
		b := get(t.Context(), c) // arrives during call 1
		synctest.Wait()
		f.release <- struct{}{}
		<-a
		synctest.Wait()          // call 2 under way for b
		d := get(t.Context(), c) // arrives during call 2: must wait for call 3
		synctest.Wait()
		f.release <- struct{}{}
		if v := <-b; v != 2 {
			t.Fatalf("b got call %d; want 2", v)
		}
		select {
		case v := <-d:
			t.Fatalf("d got call %d, which was sent before d arrived", v)
		default:
		}
		synctest.Wait()
		f.release <- struct{}{}
		if v := <-d; v != 3 {
			t.Fatalf("d got call %d; want 3", v)
		}
	}))

	t.Run("IdleStartsAtOnce", bubble(func(t *testing.T, f *fakeOffsets, c *Coalescer[int64]) {
		for want := int64(1); want <= 3; want++ {
			ch := get(t.Context(), c)
			synctest.Wait()
			f.release <- struct{}{}
			if v := <-ch; v != want {
				t.Fatalf("sequential caller got call %d; want %d", v, want)
			}
			synctest.Wait() // the call finished and the coalescer is idle
		}
	}))

	t.Run("ErrCallerContextEndsWithoutEndingTheCall", bubble(func(t *testing.T, f *fakeOffsets, c *Coalescer[int64]) {
		ctx, cancel := context.WithCancel(t.Context())
		starter := make(chan error, 1)
		go func() {
			_, err := c.Do(ctx)
			starter <- err
		}()
		synctest.Wait()
		other := get(t.Context(), c) // joins call 2
		synctest.Wait()
		cancel() // the caller that started call 1 gives up
		if err := <-starter; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled caller: %v; want context.Canceled", err)
		}
		f.release <- struct{}{} // call 1 still answers, to no one
		synctest.Wait()
		f.release <- struct{}{}
		if v := <-other; v != 2 {
			t.Fatalf("other caller got call %d; want 2", v)
		}
	}))

	t.Run("ErrFromTheCallReachesItsCallers", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			boom := errors.New("broker unreachable")
			c := New(func(context.Context) (int64, error) { return 0, boom }, 5*time.Second)
			if _, err := c.Do(t.Context()); !errors.Is(err, boom) {
				t.Fatalf("got %v; want %v", err, boom)
			}
		})
	})
}
