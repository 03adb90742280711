package writer

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestRangeFromOverlay: with no projector, every write is in the
// overlay only; a range delete still finds every key under its prefix
// (and none outside it), deleted or written in the same round or before,
// and an expireDue finds nothing due.
func TestRangeFromOverlay(t *testing.T) {
	t.Parallel()
	broker := testenv.MustBroker(t, 1)
	store := projection.New(testenv.MustPostgres(t))
	w := runWriter(t, broker, store, Config{InstanceID: "a"})
	testenv.WaitFor(t, 30*time.Second, "writer ready", w.Ready)
	ctx := t.Context()
	put := func(k string) *decide.KV {
		return &decide.KV{Header: decide.Header{Key: mustKey(t, k), Op: contract.OpPut, Principal: "p"}, Value: json.RawMessage(`1`)}
	}
	p := "tenant/a/project/b/r/"
	for i := range 20 {
		if _, err := w.Do(ctx, put(fmt.Sprintf("%sk%02d", p, i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Do(ctx, put("tenant/a/project/b/r2")); err != nil {
		t.Fatal(err)
	}
	del := &decide.KV{Header: decide.Header{Key: mustKey(t, p+"k03"), Op: contract.OpDelete, Principal: "p"}}
	if _, err := w.Do(ctx, del); err != nil {
		t.Fatal(err)
	}
	scope := mustKey(t, "tenant/a/project/b/x")
	scope.Path = ""
	rng := func(op contract.Op) *decide.Range {
		return &decide.Range{Header: decide.Header{Key: scope, Op: op, Principal: "p"}, Prefix: p}
	}
	// Puts submitted with the range delete: each is decided before or
	// after it, in its round or another; either way none is left out.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := w.Do(ctx, put(fmt.Sprintf("%sl%02d", p, i))); err != nil {
				t.Error(err)
			}
		})
	}
	res, err := w.Do(ctx, rng(contract.OpDeleteRange))
	wg.Wait()
	if err != nil || res.Prefix.Count < 19 || res.Prefix.Count > 27 || res.Prefix.Truncated {
		t.Fatalf("range delete: %+v %v, want 19 keys and the puts decided before it", res.Prefix, err)
	}
	late := 19 + 8 - res.Prefix.Count
	again, err := w.Do(ctx, rng(contract.OpDeleteRange))
	if err != nil || again.Prefix.Count != late {
		t.Fatalf("second range delete: %+v %v, want the %d puts decided after the first", again.Prefix, err, late)
	}
	st, err := w.State(ctx, mustKey(t, "tenant/a/project/b/r2"))
	if err != nil || !st.Live {
		t.Fatalf("the key outside the prefix: %+v %v", st, err)
	}
	if due, err := w.Do(ctx, rng(contract.OpExpireDue)); err != nil || due.Prefix.Count != 0 {
		t.Fatalf("expireDue: %+v %v", due.Prefix, err)
	}
}

// TestEventBytesBoundsTheRecord: decide.EventBytes, by which a prefix
// write sizes itself, is at least the bytes of the kv.changes record of
// a delete or expire event (changelog.RecordBytes), with the default
// source and one of 150 characters, so the batch's budget never finds a
// sized prefix write too large; and 1000 deletes of small keys fit the
// budget of Kafka's default max.message.bytes.
func TestEventBytesBoundsTheRecord(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	exp := now.Add(-time.Second)
	long := strings.Repeat("k", 100)
	for _, ev := range []*contract.Event{
		{Key: "tenant/a/project/b/k", Kind: contract.KindDelete, Op: contract.OpDelete, Version: 2, PrevVersion: 1, Before: json.RawMessage(`1`), After: json.RawMessage("null")},
		{SchemaVersion: contract.SchemaVersion, Key: "tenant/" + long[:20] + "/project/" + long[:20] + "/" + long[:70], Scope: "tenant/" + long[:20] + "/project/" + long[:20],
			Kind: contract.KindExpire, Op: contract.OpExpire, Version: 1 << 40, PrevVersion: 1<<40 - 1, Before: json.RawMessage(`{"a":"` + long + `"}`), After: json.RawMessage("null"),
			CreatedAt: now, ExpiresAt: &exp, Semantics: contract.Semantics{Purpose: contract.PurposeLeader, Producer: long, ConsumerHints: []string{long, "b"}, TTLSeconds: 1 << 30},
			SpecRef: long, Principal: long, TS: now, WriterEpoch: 1 << 50, TxnID: "0a1b2c3d-4e5f-5a6b-8c7d-9e0f1a2b3c4d", TxnSize: 1000},
	} {
		for _, source := range []string{"eskv-writer", "eskv://writer/" + long + strings.Repeat("s", 36)} {
			r, err := changelog.Record(ev, "kv.changes", 11, source)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := decide.EventBytes(ev), changelog.RecordBytes(r); got < want {
				t.Errorf("EventBytes %d < RecordBytes %d of %s from a source of %d characters", got, want, ev.Key, len(source))
			}
		}
	}
	small := &contract.Event{Key: "tenant/acme/project/demo/jobs/2026/k0001", Before: json.RawMessage(`{"n":1}`), Principal: "svc:billing",
		Semantics: contract.Semantics{Purpose: "other"}}
	budget := changelog.DefaultMaxMessageBytes - 1<<10 // batchbytes' headroom
	if n := contract.MaxRangeKeys * decide.EventBytes(small); n > budget {
		t.Errorf("%d deletes of small keys take %d bytes by EventBytes, over the default budget %d", contract.MaxRangeKeys, n, budget)
	}
}
