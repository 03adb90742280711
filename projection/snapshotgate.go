package projection

import (
	"context"
	"slices"
	"sync"
)

// readerKey is the context key of the reader a Snapshot is taken for.
type readerKey struct{}

// WithReader returns ctx naming reader (a principal) as the one its
// Snapshots are taken for: the slots of a pool's snapshots are shared
// fairly among readers (snapshotGate). Snapshots of a ctx that names no
// reader count as one reader's, "".
func WithReader(ctx context.Context, reader string) context.Context {
	return context.WithValue(ctx, readerKey{}, reader)
}

// ReaderOf is the reader ctx names (WithReader; "" for none).
func ReaderOf(ctx context.Context) string {
	r, _ := ctx.Value(readerKey{}).(string)
	return r
}

// snapshotGate hands out a pool's snapshot slots (snapshotConns) fairly
// among readers: a slot that frees while snapshots wait goes to the
// waiter whose reader holds the fewest slots, the earliest among them,
// not to the earliest waiter. So one reader's page reads, however many
// it queues, hold the slots only while no other reader waits: another
// reader waits for the first slot to free, not for every read queued
// before its own (with first come, first served, one tenant's four
// listings held both slots of a 4-connection pool and queued two more
// ahead of everyone else's). Free slots are taken at once (it wastes
// none).
type snapshotGate struct {
	mu      sync.Mutex
	free    int
	held    map[string]int
	waiting []*snapshotWaiter
}

// snapshotWaiter is a snapshot waiting for a slot: ready is closed when
// release hands it one.
type snapshotWaiter struct {
	reader string
	ready  chan struct{}
}

func newSnapshotGate(slots int) *snapshotGate {
	return &snapshotGate{free: slots, held: make(map[string]int)}
}

// acquire takes a slot for reader, waiting for one with ctx.
func (g *snapshotGate) acquire(ctx context.Context, reader string) error {
	g.mu.Lock()
	if g.free > 0 {
		g.free--
		g.held[reader]++
		g.mu.Unlock()
		return nil
	}
	w := &snapshotWaiter{reader: reader, ready: make(chan struct{})}
	g.waiting = append(g.waiting, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.waiting, w); i >= 0 {
			g.waiting = slices.Delete(g.waiting, i, i+1)
			g.mu.Unlock()
			return ctx.Err()
		}
		g.mu.Unlock()
		g.release(reader) // handed a slot meanwhile: the next waiter's
		return ctx.Err()
	}
}

// release gives reader's slot back: to the waiter whose reader holds the
// fewest slots (the earliest among them), or to the free ones.
func (g *snapshotGate) release(reader string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held[reader]--; g.held[reader] <= 0 {
		delete(g.held, reader)
	}
	if len(g.waiting) == 0 {
		g.free++
		return
	}
	next := 0
	for i, w := range g.waiting {
		if g.held[w.reader] < g.held[g.waiting[next].reader] {
			next = i
		}
	}
	w := g.waiting[next]
	g.waiting = slices.Delete(g.waiting, next, next+1)
	g.held[w.reader]++
	close(w.ready)
}
