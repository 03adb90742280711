package projection_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/testenv"
)

// pushTTL pushes an item whose own TTL ends at expiresAt.
func (m *queueModel) pushTTL(data string, expiresAt time.Time) contract.Event {
	m.version++
	if m.since == 0 {
		m.since = m.version
	}
	at := t0.Add(time.Duration(m.version) * time.Second)
	return m.event(contract.OpQPush, contract.Element{Member: elemkey.QueueMember(m.since, 0, m.version), Value: json.RawMessage(data),
		State: decide.ItemReady, PushedAt: &at, ExpiresAt: &expiresAt})
}

// expire is the sweeper's qexpire of member: removed (done with a
// dedupId).
func (m *queueModel) expire(member string) contract.Event {
	m.version++
	el := m.items[member]
	if el.State == decide.ItemInFlight {
		m.inFlight--
	}
	el.State, el.VisibleAt = "", nil
	if el.DedupID != "" {
		el.State = decide.ItemDone
	}
	return m.event(contract.OpQExpire, el)
}

// TestApplyQueueItemTTL: the item's own expiry its events carry is
// stored (expires_at) and read back; peek and the writer's heads (asked
// with a time) skip items past it; ExpiredItems lists the ready and
// in-flight items past it, earliest first, and no longer lists one the
// sweeper's qexpire removed; diff compares expires_at.
func TestApplyQueueItemTTL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := testenv.MustPostgresDB(t)
	s := projection.New(pg.Pool)
	m := newQueueModel(t, "tenant/t/project/p/ttl", 0)
	past, future := t0.Add(-time.Minute), t0.Add(time.Hour)
	deadline := t0.Add(time.Minute)
	evs := []contract.Event{m.pushTTL(`"gone"`, past), m.push(`"kept"`, 0, ""), m.pushTTL(`"fresh"`, future),
		m.pushTTL(`"flying"`, past.Add(time.Second))}
	// "flying" goes in flight before its TTL ends.
	flying := evs[3].Element.Member
	evs = append(evs, m.popMember(flying, &deadline))
	mustApply(t, s, "kv.ttl", batchOf(0, evs...))
	gone, fresh := evs[0].Element.Member, evs[2].Element.Member

	f, err := s.Find(ctx, projection.Query{Items: []projection.ElementRef{{Collection: m.key, Member: flying}}})
	if it := f.Items[projection.ElementRef{Collection: m.key, Member: flying}]; err != nil || it.ExpiresAt == nil || !it.ExpiresAt.Equal(past.Add(time.Second)) {
		t.Fatalf("item %+v %v, want its expiry read back", it, err)
	}
	if got := mustPeek(t, s, m.key, 10); len(got) != 2 || string(got[0].Value) != `"kept"` || string(got[1].Value) != `"fresh"` ||
		got[1].ExpiresAt == nil || !got[1].ExpiresAt.Equal(future) {
		t.Fatalf("peek %+v, want kept and fresh (gone expired, flying in flight)", got)
	}
	heads := func(now time.Time) []contract.Element {
		f, err := s.Find(ctx, projection.Query{Heads: []projection.HeadRef{{Queue: m.key, Limit: 10, Now: now}}})
		if err != nil {
			t.Fatal(err)
		}
		return f.Heads[m.key]
	}
	if got := heads(t0); len(got) != 2 || got[0].Member == gone {
		t.Fatalf("heads at t0 %+v, want the two unexpired", got)
	}
	if got := heads(time.Time{}); len(got) != 3 || got[0].Member != gone {
		t.Fatalf("heads without a time %+v, want all three ready rows", got)
	}
	due, err := s.ExpiredItems(ctx, 0, t0, 10)
	if err != nil || len(due) != 2 || due[0].Member != gone || due[1].Member != flying || due[1].Deliveries != 1 {
		t.Fatalf("expired items %+v %v, want gone then flying", due, err)
	}
	if due, err := s.ExpiredItems(ctx, 0, t0, 1); err != nil || len(due) != 1 {
		t.Fatalf("limit 1: %+v %v", due, err)
	}
	exps := batchOf(int64(len(evs)), m.expire(gone), m.expire(flying))
	mustApply(t, s, "kv.ttl", exps)
	if due, err := s.ExpiredItems(ctx, 0, future, 10); err != nil || len(due) != 1 || due[0].Member != fresh {
		t.Fatalf("after the expiries, at the last TTL: %+v %v, want only fresh", due, err)
	}
	st := mustState(t, s, m.key)
	if meta, err := contract.ParseCollectionMeta(st.Entry.Value); err != nil || meta.Size != 2 || meta.InFlight != 0 {
		t.Fatalf("metadata %s %v, want size 2, none in flight", st.Entry.Value, err)
	}

	rebuilt := projection.New(pg.MustSchema(t, "rebuilt"))
	mustApply(t, rebuilt, "kv.ttl", batchOf(0, slices.Clone(evs)...))
	mustApply(t, rebuilt, "kv.ttl", exps)
	if _, err := pg.Pool.Exec(ctx, `UPDATE kv_elements SET expires_at = expires_at + interval '1 second' WHERE expires_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	d, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: "kv.ttl", Limit: 10})
	if err != nil || d.Equal() || len(d.Keys) != 1 || !slices.Contains(d.Keys[0].Columns, "elements") {
		t.Fatalf("diff %+v %v, want the queue's elements to differ on expires_at", d, err)
	}
}

// popMember takes member in flight until deadline.
func (m *queueModel) popMember(member string, deadline *time.Time) contract.Event {
	m.version++
	el := m.items[member]
	el.Deliveries++
	el.State, el.VisibleAt = decide.ItemInFlight, deadline
	m.inFlight++
	return m.event(contract.OpQPop, el)
}
