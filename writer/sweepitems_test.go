package writer

import (
	"context"
	"fmt"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
)

// TestSweepItemsCopiesOverlayMembers: sweepItems checks the projection's
// due items against the overlay's members after releasing the read lock,
// while the partition's goroutine may change an entry's items in place
// (withItem, under the write lock). It must look them up in a copy: under
// -race this test failed while it kept the overlay's own maps.
func TestSweepItemsCopiesOverlayMembers(t *testing.T) {
	const queue = "tenant/t/project/p/q"
	p := &partition{w: &Writer{cfg: Config{SweepBatch: 10}}, ready: true, overlay: map[string]overlayEntry{
		queue: {items: map[string]overlayItem{"m1": {el: contract.Element{State: contract.ItemReady}, offset: 5}}},
	}}
	rowsAsked, changed := make(chan struct{}), make(chan struct{})
	go func() { // the partition's goroutine, committing pushes meanwhile
		defer close(changed)
		<-rowsAsked
		p.mu.Lock()
		defer p.mu.Unlock()
		e := p.overlay[queue]
		for i := range 50 {
			el := &contract.Element{Op: contract.ElementAdd, Member: fmt.Sprint("n", i), State: contract.ItemReady}
			e = e.withItem(&contract.Event{Op: contract.OpQPush, Element: el}, int64(6+i))
		}
		p.overlay[queue] = e
	}()
	reqs, err := p.sweepItems(context.Background(), contract.OpQExpire, func(*contract.Element) bool { return false },
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
