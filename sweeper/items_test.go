package sweeper

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
)

// overlay is a partition whose overlay the test changes in place under
// its write lock, as the partition's goroutine does.
type overlay struct {
	mu    sync.RWMutex
	items map[string]map[string]contract.Element
}

func (o *overlay) ID() int32                                                  { return 0 }
func (o *overlay) Log() *slog.Logger                                          { return slog.Default() }
func (o *overlay) Entries(func(string, keystate.State)) bool                  { return true }
func (o *overlay) Submit(decide.Command) (func(context.Context) error, error) { return nil, nil }

func (o *overlay) Items(fn func(queue, member string, el *contract.Element)) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	for q, items := range o.items {
		for m, el := range items {
			fn(q, m, &el)
		}
	}
	return true
}

// TestSweepItemsCopiesOverlayMembers: items checks the projection's due
// items against the overlay's members after the partition's read lock is
// released, while the partition's goroutine may change an entry's items
// in place (under the write lock). It must look them up in a copy: under
// -race this test failed while it kept the overlay's own maps.
func TestSweepItemsCopiesOverlayMembers(t *testing.T) {
	const queue = "tenant/t/project/p/q"
	p := &overlay{items: map[string]map[string]contract.Element{queue: {"m1": {State: decide.ItemReady}}}}
	rowsAsked, changed := make(chan struct{}), make(chan struct{})
	go func() { // the partition's goroutine, committing pushes meanwhile
		defer close(changed)
		<-rowsAsked
		p.mu.Lock()
		defer p.mu.Unlock()
		for i := range 50 {
			p.items[queue][fmt.Sprint("n", i)] = contract.Element{Op: contract.ElementAdd, State: decide.ItemReady}
		}
	}()
	s := New(Config{Batch: 10}, nil, nil)
	reqs, err := s.items(p, contract.OpQExpire, func(*contract.Element) bool { return false },
		func(int) ([]projection.DueItem, error) {
			close(rowsAsked)
			return []projection.DueItem{{Queue: queue, Member: "m1"}, {Queue: queue, Member: "m2"}}, nil
		})
	<-changed
	if err != nil {
		t.Fatal(err)
	}
	// m1's latest change is the overlay's (not due there): the projection's
	// row of it is stale and left alone; m2 is the projection's alone.
	var q *decide.Queue
	if len(reqs) == 1 {
		q, _ = reqs[0].(*decide.Queue)
	}
	if q == nil || q.Item != "m2" || q.Op != contract.OpQExpire || q.Key.String() != queue {
		t.Fatalf("requests: %+v", reqs)
	}
}
