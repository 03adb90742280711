package writer

import (
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/elemkey"
)

// TestQueueViewSkipsExpired: a pop's candidates (the overlay's items and
// the projection's heads) leave out the items past their own TTL, so the
// next unexpired item is served.
func TestQueueViewSkipsExpired(t *testing.T) {
	t.Parallel()
	now := time.Now()
	past, future := now.Add(-time.Second), now.Add(time.Minute)
	q := "tenant/a/project/b/tasks"
	m := func(v int64) string { return elemkey.QueueMember(5, 0, v) }
	v := newQueueView()
	v.overlay[q] = map[string]overlayItem{m(6): {el: contract.Element{Member: m(6), State: decide.ItemReady, ExpiresAt: &past}}}
	v.heads[q] = []contract.Element{{Member: m(7), State: decide.ItemReady, ExpiresAt: &past}, {Member: m(8), State: decide.ItemReady, ExpiresAt: &future}}
	head, probe := v.firstReady(q, 5, now)
	if head == nil || head.Member != m(8) || probe {
		t.Fatalf("head %+v probe %v, want %s (the first unexpired) without a probe", head, probe, m(8))
	}
	v.heads[q] = v.heads[q][:1]
	if head, probe = v.firstReady(q, 5, now); head != nil || !probe {
		t.Fatalf("head %+v probe %v, want none found and a probe for more", head, probe)
	}
}
