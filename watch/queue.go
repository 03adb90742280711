package watch

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
)

// eventOverhead is what a decoded event costs beyond its record's bytes
// (the Event struct, its strings' headers, the Item): an event counts
// len(key) + len(value) + eventOverhead against a buffer's bytes.
const eventOverhead = 512

// recordSize is what the event of r counts against a buffer's bytes.
func recordSize(r *kgo.Record) int64 {
	return int64(len(r.Key)+len(r.Value)) + eventOverhead
}

// errEnded: the queue was ended (its subscription is over).
var errEnded = errors.New("watch: the subscription ended")

// queued is an item and what it counts against the queue's bytes.
type queued struct {
	it   Item
	size int64
}

// queue is a subscription's buffer of the events its client has not
// taken yet, bounded in events (Config.Buffer) and in bytes
// (Config.BufferBytes); an event larger than the byte bound is taken
// when the buffer is empty. Its pump (Sub.pump) hands the events to C,
// one at a time: the one it holds counts until C took it. The tailer
// offers without waiting and ends a subscription whose buffer is full; a
// catch-up pushes waiting for room; and the pump ends a subscription
// whose client took nothing for Config.Stall. Each way a client that
// does not take its events is ended slow_consumer, and end drops the
// buffer at once: a client that stopped reading holds one event, not its
// buffer, until its connection's write deadline passes.
type queue struct {
	maxItems int
	maxBytes int64
	total    *atomic.Int64 // the hub's buffered bytes (Hub.BufferedBytes)

	mu    sync.Mutex
	items []queued
	bytes int64 // items' sizes and the size of the one the pump holds
	err   error
	ready chan struct{} // a token: an item was added
	room  chan struct{} // a token: the client took an item
	quit  chan struct{} // closed by end
}

func newQueue(maxItems int, maxBytes int64, total *atomic.Int64) *queue {
	return &queue{maxItems: maxItems, maxBytes: maxBytes, total: total,
		ready: make(chan struct{}, 1), room: make(chan struct{}, 1), quit: make(chan struct{})}
}

// fits reports whether an item of size may be added; q.mu is held.
func (q *queue) fits(size int64) bool {
	if q.bytes == 0 {
		return true
	}
	return len(q.items) < q.maxItems && q.bytes+size <= q.maxBytes
}

// add adds e; q.mu is held and e fits.
func (q *queue) add(e queued) {
	q.items = append(q.items, e)
	q.bytes += e.size
	q.total.Add(e.size)
	signal(q.ready)
}

// offer adds e unless the queue is full, without waiting; it reports
// false only when full (an ended queue drops e).
func (q *queue) offer(e queued) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.err != nil:
		return true
	case !q.fits(e.size):
		return false
	}
	q.add(e)
	return true
}

// push adds e, waiting for room while the client takes events (the
// pump ends the queue when it takes none); it returns errEnded once the
// queue ended, or ctx's error.
func (q *queue) push(ctx context.Context, e queued) error {
	for {
		q.mu.Lock()
		switch {
		case q.err != nil:
			q.mu.Unlock()
			return errEnded
		case q.fits(e.size):
			q.add(e)
			q.mu.Unlock()
			return nil
		}
		q.mu.Unlock()
		select {
		case <-q.room:
		case <-q.quit:
			return errEnded
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// next takes the oldest item for the pump, waiting for one; false once
// the queue ended.
func (q *queue) next() (queued, bool) {
	for {
		q.mu.Lock()
		if q.err != nil {
			q.mu.Unlock()
			return queued{}, false
		}
		if len(q.items) > 0 {
			e := q.items[0]
			q.items[0] = queued{}
			q.items = q.items[1:]
			q.mu.Unlock()
			return e, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-q.quit:
			return queued{}, false
		}
	}
}

// taken gives back the bytes of the item the pump held (C took it, or
// the queue ended).
func (q *queue) taken(size int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.bytes -= size
	q.total.Add(-size)
	signal(q.room)
}

// pending is how many events wait behind the one the pump hands over:
// the pump's own is not counted, because the pump still holds it for a
// moment after C took it (Sub.Pending).
func (q *queue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// end ends the queue with err, dropping its items; only the first end
// counts, and it reports whether it was this one.
func (q *queue) end(err error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return false
	}
	q.err = err
	for _, e := range q.items {
		q.bytes -= e.size
		q.total.Add(-e.size)
	}
	q.items = nil
	close(q.quit)
	return true
}

// signal leaves a token in c unless one is there.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
