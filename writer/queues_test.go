package writer

import (
	"reflect"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/elemkey"
)

// TestQueueViewBatch: within one batch, a pop sees the items decided
// before it (so two pops take different items), the overlay's items
// shadow the projection's rows of the same member, and an item of an
// earlier incarnation is never a candidate.
func TestQueueViewBatch(t *testing.T) {
	t.Parallel()
	q := "tenant/a/project/b/tasks"
	m := func(prio, v int64) string { return elemkey.QueueMember(5, prio, v) }
	v := newQueueView()
	v.overlay[q] = map[string]overlayItem{
		m(0, 9):                       {el: contract.Element{Member: m(0, 9), State: decide.ItemReady}},
		m(-1, 7):                      {el: contract.Element{Member: m(-1, 7), State: decide.ItemInFlight}},
		elemkey.QueueMember(1, -9, 2): {el: contract.Element{Member: elemkey.QueueMember(1, -9, 2), State: decide.ItemReady}},
	}
	v.heads[q] = []contract.Element{{Member: m(-1, 7), State: decide.ItemReady}, {Member: m(0, 6), State: decide.ItemReady}}
	v.complete[q] = 5
	var order []string
	for range 3 {
		head, probe := v.firstReady(q, 5, time.Now())
		if head == nil {
			order = append(order, "none")
			if probe {
				t.Fatal("a complete head list asks for a probe")
			}
			continue
		}
		order = append(order, head.Member)
		el := *head
		el.State = decide.ItemInFlight
		v.batch[decide.ElementRef{Collection: q, Member: head.Member}] = el
	}
	if want := []string{m(0, 6), m(0, 9), "none"}; !reflect.DeepEqual(order, want) {
		t.Fatalf("pops took %v, want %v", order, want)
	}
	if _, probe := newQueueView().firstReady(q, 5, time.Now()); !probe {
		t.Fatal("no heads known: want a probe")
	}
}

// TestTrimPrunesProjectedItems: a queue written without pause keeps its
// overlay entry (its latest event is not projected yet), but trim drops
// the items whose latest change the projection holds, replacing the map
// so a batch deciding on the one it read still sees it whole.
func TestTrimPrunesProjectedItems(t *testing.T) {
	t.Parallel()
	w := offlineWriter(t, Config{Topics: changelog.Topics{Changes: "c", Conflicts: "x", Partitions: 1}})
	p := newPartition(w, 0)
	q := "tenant/a/project/b/tasks"
	var o overlayEntry
	for v := int64(1); v <= 3; v++ {
		o = o.next(&contract.Event{Key: q, Version: v, Kind: contract.KindPut, Op: contract.OpQPush,
			Element: &contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(1, 0, v), State: decide.ItemReady}}, 10+v, testWindow)
	}
	p.setReady(true, 1, map[string]overlayEntry{q: o})
	read := p.overlay[q].items // what a deciding batch holds
	p.trim(13)                 // the projector applied offsets 11 and 12
	e, ok := p.overlay[q]
	if !ok || len(e.items) != 1 || e.items[elemkey.QueueMember(1, 0, 3)].offset != 13 {
		t.Fatalf("after trim: entry %v items %+v, want only the unprojected item", ok, e.items)
	}
	if len(read) != 3 {
		t.Fatalf("the map a batch read changed: %+v", read)
	}
	p.trim(14)
	if _, ok := p.overlay[q]; ok {
		t.Fatal("the entry whose latest event is projected stays")
	}
}
