package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/testenv"
)

// queueModel folds queue ops the way the writer decides them and emits
// their events (each carrying the item's full new state), so the
// projection can be checked against the fold.
type queueModel struct {
	tb       testing.TB
	key      string
	version  int64
	since    int64
	items    map[string]contract.Element // rows: member -> state (done included)
	inFlight int64
}

func newQueueModel(tb testing.TB, key string, version int64) *queueModel {
	return &queueModel{tb: tb, key: key, version: version, items: map[string]contract.Element{}}
}

func (m *queueModel) size() int64 {
	var n int64
	for _, el := range m.items {
		if el.State != decide.ItemDone && inIncarnation(el.Member, m.since) {
			n++
		}
	}
	return n
}

func inIncarnation(member string, since int64) bool {
	from, to := elemkey.QueueRange(since)
	return member >= from && member < to
}

func (m *queueModel) event(op contract.Op, el contract.Element) contract.Event {
	if el.State == "" {
		el.Op = contract.ElementRemove
		delete(m.items, el.Member)
	} else {
		el.Op = contract.ElementAdd
		m.items[el.Member] = el
	}
	meta, _ := json.Marshal(contract.CollectionMeta{Type: "queue", Size: m.size(), Since: m.since, InFlight: m.inFlight})
	e := put(m.tb, m.key, m.version, string(meta))
	e.Op, e.Semantics, e.Element = op, contract.Semantics{Purpose: "queue"}, &el
	return e
}

func (m *queueModel) push(data string, prio int64, dedup string) contract.Event {
	m.version++
	if m.since == 0 {
		m.since = m.version
	}
	at := t0.Add(time.Duration(m.version) * time.Second)
	return m.event(contract.OpQPush, contract.Element{Member: elemkey.QueueMember(m.since, prio, m.version), Value: json.RawMessage(data),
		State: decide.ItemReady, DedupID: dedup, PushedAt: &at})
}

// ready lists the ready items of the current incarnation in serving
// order.
func (m *queueModel) ready() []contract.Element {
	var out []contract.Element
	for _, k := range slices.Sorted(maps.Keys(m.items)) {
		if el := m.items[k]; el.State == decide.ItemReady && inIncarnation(k, m.since) {
			out = append(out, el)
		}
	}
	return out
}

// pop takes the first ready item: in flight until deadline when given,
// else removed (done with a dedupId).
func (m *queueModel) pop(deadline *time.Time) contract.Event {
	m.version++
	el := m.ready()[0]
	el.Deliveries++
	switch {
	case deadline != nil:
		el.State, el.VisibleAt = decide.ItemInFlight, deadline
		el.ReceiptNonce = fmt.Sprintf("%032x", m.version)
		m.inFlight++
	case el.DedupID != "":
		el.State = decide.ItemDone
	default:
		el.State = ""
	}
	return m.event(contract.OpQPop, el)
}

func (m *queueModel) ack(member string) contract.Event {
	m.version++
	el := m.items[member]
	el.State, el.VisibleAt, el.ReceiptNonce = "", nil, ""
	if el.DedupID != "" {
		el.State = decide.ItemDone
	}
	m.inFlight--
	return m.event(contract.OpQAck, el)
}

func (m *queueModel) requeue(member string) contract.Event {
	m.version++
	el := m.items[member]
	el.State, el.VisibleAt, el.ReceiptNonce = decide.ItemReady, nil, ""
	m.inFlight--
	return m.event(contract.OpQRequeue, el)
}

func mustPeek(tb testing.TB, s *projection.Store, key string, count int) []contract.Element {
	tb.Helper()
	items, _, err := s.Peek(context.Background(), key, count, 1<<20, t0)
	if err != nil {
		tb.Fatal(err)
	}
	return items
}

// sameItems compares items by member, data, state and deliveries.
func sameItems(got, want []contract.Element) bool {
	return slices.EqualFunc(got, want, func(a, b contract.Element) bool {
		return a.Member == b.Member && string(a.Value) == string(b.Value) && a.State == b.State && a.Deliveries == b.Deliveries
	})
}

// TestApplyQueues: pushes of mixed priorities, pops with and without a
// visibility timeout, acks and requeues, applied in batches of any cut
// and replayed, leave the projection holding the fold of the events:
// peek serves the model's ready items in (priority, FIFO) order with
// their deliveries; the writer's reads (heads but the overlay's members,
// items by member, dedupIds, in-flight items past their deadline) find
// the model's rows; a deleted queue's rows are not the next queue's.
func TestApplyQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	m := newQueueModel(t, "tenant/t/project/p/tasks", 0)
	deadline := t0.Add(-time.Second) // already past at t0
	var evs []contract.Event
	for i := range 12 {
		dedup := ""
		if i%4 == 0 {
			dedup = fmt.Sprintf("d%d", i)
		}
		evs = append(evs, m.push(fmt.Sprintf(`{"n":%d}`, i), int64(i%3-1), dedup))
	}
	evs = append(evs, m.pop(nil), m.pop(&deadline), m.pop(&deadline), m.pop(nil))
	inflight := []string{evs[13].Element.Member, evs[14].Element.Member}
	evs = append(evs, m.ack(inflight[0]), m.requeue(inflight[1]), m.pop(&deadline), m.push(`"last"`, -5, "d0"))
	for i := 0; i < len(evs); i += 3 {
		b := batchOf(int64(i), evs[i:min(i+3, len(evs))]...)
		mustApply(t, s, "kv.queues", b)
		mustApply(t, s, "kv.queues", b) // a replay changes nothing
	}
	if got, want := mustPeek(t, s, m.key, 100), m.ready(); !sameItems(got, want) {
		t.Fatalf("peek = %+v, want %+v", got, want)
	}
	if got := mustPeek(t, s, m.key, 2); !sameItems(got, m.ready()[:2]) {
		t.Fatalf("peek 2 = %+v", got)
	}
	st := mustState(t, s, m.key)
	meta, err := contract.ParseCollectionMeta(st.Entry.Value)
	if err != nil || meta.Size != m.size() || meta.InFlight != 1 {
		t.Fatalf("metadata %s %v, want size %d, 1 in flight", st.Entry.Value, err, m.size())
	}

	t.Run("OKFindReadsWhatTheWriterDecidesOn", func(t *testing.T) {
		ready := m.ready()
		var done, flying string
		for k, el := range m.items {
			switch el.State {
			case decide.ItemDone:
				done = k
			case decide.ItemInFlight:
				flying = k
			}
		}
		q := projection.Query{
			Heads:  []projection.HeadRef{{Queue: m.key, Exclude: []string{ready[0].Member}, Limit: 2}, {Queue: "tenant/t/project/p/none", Limit: 1}},
			Dedups: []projection.DedupRef{{Queue: m.key, DedupID: "d0"}, {Queue: m.key, Since: m.since, DedupID: "d4"}, {Queue: m.key, DedupID: "nope"}},
			Items:  []projection.ElementRef{{Collection: m.key, Member: done}, {Collection: m.key, Member: flying}, {Collection: m.key, Member: elemkey.QueueMember(1, 0, 99)}},
		}
		f, err := s.Find(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if !sameItems(f.Heads[m.key], ready[1:3]) || len(f.Heads["tenant/t/project/p/none"]) != 0 {
			t.Fatalf("heads %+v, want %+v", f.Heads, ready[1:3])
		}
		// d0 was pushed twice (the second after its first item was popped
		// as done, as a push past the window would): the newest answers.
		if d := f.Dedups[q.Dedups[0]]; d.Member != evs[len(evs)-1].Element.Member {
			t.Fatalf("dedup d0 = %+v, want the newest push", d)
		}
		if d, ok := f.Dedups[q.Dedups[1]]; !ok || d.DedupID != "d4" {
			t.Fatalf("dedup d4 = %+v %v", d, ok)
		}
		if _, ok := f.Dedups[q.Dedups[2]]; ok || len(f.Items) != 2 || f.Items[q.Items[0]].State != decide.ItemDone ||
			f.Items[q.Items[1]].State != decide.ItemInFlight || f.Items[q.Items[1]].VisibleAt == nil {
			t.Fatalf("dedups %+v items %+v", f.Dedups, f.Items)
		}
		// The in-flight delivery's receipt nonce is the one its pop
		// carried (an ack is checked against it once the overlay no
		// longer holds the item); a requeue or ack dropped the others'.
		if got, want := f.Items[q.Items[1]].ReceiptNonce, m.items[flying].ReceiptNonce; got != want || want == "" || f.Items[q.Items[0]].ReceiptNonce != "" {
			t.Fatalf("receipt nonces %q %q, want %q and none", got, f.Items[q.Items[0]].ReceiptNonce, want)
		}
		for _, el := range f.Heads[m.key] {
			if el.ReceiptNonce != "" {
				t.Fatalf("ready item %+v keeps a receipt nonce", el)
			}
		}
		due, err := s.DueItems(ctx, 0, t0, 10)
		if err != nil || len(due) != 1 || due[0].Member != flying || due[0].Deliveries != 2 {
			t.Fatalf("due items %+v %v, want %s at delivery 2", due, err, flying)
		}
		if due, err := s.DueItems(ctx, 0, deadline.Add(-time.Second), 10); err != nil || len(due) != 0 {
			t.Fatalf("due items before the deadline: %+v %v", due, err)
		}
	})

	t.Run("OKDeletedQueueRowsAreNotItems", func(t *testing.T) {
		del := event(t, contract.KindDelete, m.key, m.version+1, "")
		mustApply(t, s, "kv.queues", batchOf(100, del))
		if got := mustPeek(t, s, m.key, 10); len(got) != 0 {
			t.Fatalf("deleted queue holds %+v", got)
		}
		n := newQueueModel(t, m.key, m.version+1)
		mustApply(t, s, "kv.queues", batchOf(101, n.push(`"fresh"`, 0, "d0")))
		if got := mustPeek(t, s, m.key, 10); !sameItems(got, n.ready()) {
			t.Fatalf("re-created queue holds %+v", got)
		}
		f, err := s.Find(ctx, projection.Query{Heads: []projection.HeadRef{{Queue: m.key, Limit: 10}}, Dedups: []projection.DedupRef{{Queue: m.key, DedupID: "d4"}}})
		if err != nil || !sameItems(f.Heads[m.key], n.ready()) || len(f.Dedups) != 0 {
			t.Fatalf("find after re-create: %+v %v", f, err)
		}
		if due, err := s.DueItems(ctx, 0, t0, 10); err != nil || len(due) != 0 {
			t.Fatalf("due items of the deleted queue: %+v %v", due, err)
		}
	})
}

// TestCompareQueues: projector diff compares each live queue's items
// (state, deliveries, data): a rebuild that lost an item differs, one
// that kept only each item's latest event does not.
func TestCompareQueues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newQueueModel(t, "tenant/t/project/p/q", 0)
	deadline := t0.Add(time.Minute)
	log := batchOf(0, m.push(`"a"`, 0, ""), m.push(`"b"`, 1, ""), m.pop(&deadline), m.push(`"c"`, -1, ""))
	for _, tc := range []struct {
		name    string
		rebuilt []projection.Applied
		extra   string // run on the live projection
		differs bool
	}{
		{"OKSameLog", log, "", false},
		{"ErrStateDiffers", log, `UPDATE kv_elements SET state = 'ready' WHERE state = 'inflight'`, true},
		{"ErrDeliveriesDiffer", log, `UPDATE kv_elements SET deliveries = 3 WHERE state = 'inflight'`, true},
		{"ErrDataDiffers", log, `UPDATE kv_elements SET value = '"z"' WHERE value = '"b"'`, true},
		// Each event carries its item's whole state: the pop alone
		// (compaction having removed the push) restores the item.
		{"OKPopAloneRestoresItem", log[1:], "", false},
		{"ErrLostPushDiffers", append(slices.Clone(log[:1]), log[2:]...), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := testenv.MustPostgresDB(t)
			mustApply(t, projection.New(pg.Pool), "kv.queues", log)
			mustApply(t, projection.New(pg.MustSchema(t, "rebuilt")), "kv.queues", tc.rebuilt)
			if tc.extra != "" {
				if _, err := pg.Pool.Exec(ctx, tc.extra); err != nil {
					t.Fatal(err)
				}
			}
			d, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: "kv.queues", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if d.Equal() == tc.differs || (tc.differs && (len(d.Keys) != 1 || !slices.Contains(d.Keys[0].Columns, "elements"))) {
				t.Fatalf("diff %+v, keys %+v; want differs %v", d, d.Keys, tc.differs)
			}
		})
	}
}

// TestPeekByteBudget: a peek of large items is cut to the byte budget
// (but holds at least one item) and reports truncated.
func TestPeekByteBudget(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	m := newQueueModel(t, "tenant/t/project/p/big-tasks", 0)
	big := strings.Repeat("x", 60<<10)
	var evs []contract.Event
	for i := range 200 {
		evs = append(evs, m.push(fmt.Sprintf(`"%03d%s"`, i, big), 0, ""))
	}
	for i := 0; i < len(evs); i += 20 {
		mustApply(t, s, "kv.queues", batchOf(int64(i), evs[i:i+20]...))
	}
	const budget = 4 << 20
	items, truncated, err := s.Peek(context.Background(), m.key, contract.MaxPeek, budget, t0)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for _, it := range items {
		size += len(it.Value)
	}
	t.Logf("peek %d: %d items, %d KiB, truncated %v", contract.MaxPeek, len(items), size>>10, truncated)
	if size > budget || len(items) == 0 || !truncated || !sameItems(items, m.ready()[:len(items)]) {
		t.Fatalf("peek: %d items of %d bytes, truncated %v; want the first items within %d, truncated", len(items), size, truncated, budget)
	}

	t.Run("OKOneItemOverBudget", func(t *testing.T) {
		items, truncated, err := s.Peek(context.Background(), m.key, 3, 10, t0)
		if err != nil || len(items) != 1 || !truncated || !sameItems(items, m.ready()[:1]) {
			t.Fatalf("peek of %d items, truncated %v err %v; want the first item alone", len(items), truncated, err)
		}
	})
	t.Run("OKFitsUntruncated", func(t *testing.T) {
		items, truncated, err := s.Peek(context.Background(), m.key, 3, budget, t0)
		if err != nil || len(items) != 3 || truncated {
			t.Fatalf("peek of %d items, truncated %v err %v; want 3 untruncated", len(items), truncated, err)
		}
	})
}
