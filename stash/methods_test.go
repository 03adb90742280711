package stash_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/stash"
)

// TestR2_1FiveTypesAndTheirSchemas: every type is created with a value
// of its schema; values outside it are refused and change nothing.
func TestR2_1FiveTypesAndTheirSchemas(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	good := map[string]any{
		stash.TypeResource: map[string]any{"uri": "s3://b/k", "kind": "bucket", "region": "eu"},
		stash.TypeArtifact: map[string]any{"path": "out/a.tar", "producer": "crumb-1", "checksum": "sha256:00"},
		stash.TypeContext:  map[string]any{"anything": []any{1, 2}},
		stash.TypeCounter:  map[string]any{"value": 7},
		stash.TypeLock:     nil,
	}
	for typ, v := range good {
		s := mustCreate(t, tb, "good-"+typ, typ, v)
		if got := mustGet(t, tb, s.StashID); got.StashType != typ || jsonOf(t, got.Value) != jsonOf(t, v) {
			t.Fatalf("%s: read back %+v", typ, got)
		}
	}
	bad := []struct{ typ, name string }{
		{stash.TypeResource, "uri-number"}, {stash.TypeArtifact, "path-bool"}, {stash.TypeContext, "string"},
		{stash.TypeCounter, "value-string"}, {stash.TypeCounter, "value-float"}, {stash.TypeLock, "no-holder"},
		{stash.TypeResource, "empty"}, {stash.TypeArtifact, "path-only"},
	}
	values := map[string]any{
		"uri-number": map[string]any{"uri": 5}, "path-bool": map[string]any{"path": true}, "string": "just text",
		"value-string": map[string]any{"value": "7"}, "value-float": map[string]any{"value": 1.5},
		"no-holder": map[string]any{"acquired_at": "2026-01-01T00:00:00Z"},
		"empty":     map[string]any{}, "path-only": map[string]any{"path": "out/a.tar"},
	}
	for _, c := range bad {
		err := tb.Set("", &stash.Stash{Name: c.name, StashType: c.typ, Value: values[c.name]})
		wantErr(t, c.typ+" "+c.name, err, stash.ErrInvalidValue)
	}
	if n := len(mustFetch(t, tb, nil)); n != len(good) {
		t.Fatalf("%d stashes; want the %d good ones", n, len(good))
	}
	// An update without a required member is refused too, naming it.
	r := mustFetch(t, tb, map[string]any{"stash_type": stash.TypeResource})[0]
	if err := r.SetValue(map[string]any{"uri": "s3://b/other"}); err != nil {
		t.Fatal(err)
	}
	err := tb.Set(r.StashID, r)
	var e *contract.Error
	if wantErr(t, "resource update without kind", err, stash.ErrInvalidValue); !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != "value.kind" {
		t.Fatalf("resource update without kind: %v, want invalid on value.kind", err)
	}
	if got := mustGet(t, tb, r.StashID); got.Version != 1 || jsonOf(t, got.Value) != jsonOf(t, good[stash.TypeResource]) {
		t.Fatalf("after a refused update: %+v", got)
	}
}

// TestR2_3UnknownTypeRejected: at create, and a stash's type never
// changes.
func TestR2_3UnknownTypeRejected(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	for _, typ := range []string{"", "queue", "Counter"} {
		wantErr(t, "type "+typ, tb.Set("", &stash.Stash{Name: "x", StashType: typ}), stash.ErrInvalidStashType)
	}
	s := mustCreate(t, tb, "ctx", stash.TypeContext, map[string]any{})
	s.StashType = stash.TypeCounter
	s.Value = map[string]any{"value": 1}
	wantErr(t, "type change", tb.Set(s.StashID, s), stash.ErrInvalidStashType)
	if got := mustGet(t, tb, s.StashID); got.StashType != stash.TypeContext || got.Version != 1 {
		t.Fatalf("after a refused type change: %+v", got)
	}
}

// TestR2_4TypedMethodsCheckTheType: each method on the wrong type is
// ErrInvalidStashType and leaves the struct as it was.
func TestR2_4TypedMethodsCheckTheType(t *testing.T) {
	t.Parallel()
	ctx := &stash.Stash{Name: "c", StashType: stash.TypeContext, Value: map[string]any{"a": 1}, Version: 3}
	lock := &stash.Stash{Name: "l", StashType: stash.TypeLock, Version: 3}
	_, err := ctx.Increment(1)
	wantErr(t, "Increment on context", err, stash.ErrInvalidStashType)
	wantErr(t, "Acquire on context", ctx.Acquire("w"), stash.ErrInvalidStashType)
	wantErr(t, "Release on context", ctx.Release("w"), stash.ErrInvalidStashType)
	wantErr(t, "SetValue on lock", lock.SetValue(map[string]any{}), stash.ErrInvalidStashType)
	_, err = lock.Increment(1)
	wantErr(t, "Increment on lock", err, stash.ErrInvalidStashType)
	if ctx.Version != 3 || lock.Version != 3 || lock.Value != nil {
		t.Fatalf("a refused method changed the stash: %+v %+v", ctx, lock)
	}
}

// TestR3_2CreateValidatesInOrder: name, then uniqueness, then type; a
// refused create writes nothing and leaves the struct as it was.
func TestR3_2CreateValidatesInOrder(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	mustCreate(t, tb, "taken", stash.TypeContext, nil)
	for _, c := range []struct {
		s    stash.Stash
		want error
	}{
		{stash.Stash{Name: "", StashType: "bogus"}, stash.ErrInvalidName},
		{stash.Stash{Name: "taken", StashType: "bogus"}, stash.ErrDuplicateName},
		{stash.Stash{Name: "free", StashType: "bogus"}, stash.ErrInvalidStashType},
	} {
		s := c.s
		wantErr(t, "create "+s.Name+"/"+s.StashType, tb.Set("", &s), c.want)
		if s.StashID != "" || s.Version != 0 || !s.CreatedAt.IsZero() {
			t.Fatalf("a refused create filled the struct: %+v", s)
		}
	}
	if n := len(mustFetch(t, tb, nil)); n != 1 {
		t.Fatalf("%d stashes after refused creates; want 1", n)
	}
}

func TestR3_3InitialValues(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	for _, c := range []struct {
		typ   string
		value any
		want  string
	}{
		{stash.TypeCounter, nil, `{"value":0}`},
		{stash.TypeCounter, map[string]any{"value": -40}, `{"value":-40}`},
		{stash.TypeLock, nil, `null`},
	} {
		s := mustCreate(t, tb, c.typ+c.want, c.typ, c.value)
		if got := jsonOf(t, mustGet(t, tb, s.StashID).GetValue()); got != c.want {
			t.Fatalf("%s created from %v holds %s, want %s", c.typ, c.value, got, c.want)
		}
	}
}

// TestR4_2SetValueThenSetPersists: the PRD's R4.4 example.
func TestR4_2SetValueThenSetPersists(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	id := mustCreate(t, tb, "shared-config", stash.TypeContext, map[string]any{"timeout": 30}).StashID
	s := mustGet(t, tb, id)
	if err := s.SetValue(map[string]any{"timeout": 60}); err != nil {
		t.Fatal(err)
	}
	if mustGet(t, tb, id).Version != 1 {
		t.Fatal("SetValue alone persisted something")
	}
	if err := tb.Set(s.StashID, s); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, tb, id); jsonOf(t, got.GetValue()) != `{"timeout":60}` || got.Version != 2 {
		t.Fatalf("after SetValue and Set: %+v", got)
	}
	empty := mustCreate(t, tb, "empty", stash.TypeContext, nil)
	if v := mustGet(t, tb, empty.StashID).GetValue(); v != nil {
		t.Fatalf("GetValue of a stash without value = %v, want nil", v)
	}
}

// TestR4_2TwoSetsFromOneVersionOneWins: Set is a compare-and-swap on the
// version the stash was read at.
func TestR4_2TwoSetsFromOneVersionOneWins(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	id := mustCreate(t, tb, "cfg", stash.TypeContext, map[string]any{"v": 0}).StashID
	a, b := mustGet(t, tb, id), mustGet(t, tb, id)
	a.SetValue(map[string]any{"v": "a"})
	b.SetValue(map[string]any{"v": "b"})
	var wg sync.WaitGroup
	var errA, errB error
	wg.Go(func() { errA = tb.Set(id, a) })
	wg.Go(func() { errB = tb.Set(id, b) })
	wg.Wait()
	if (errA == nil) == (errB == nil) {
		t.Fatalf("errA %v, errB %v: want exactly one winner", errA, errB)
	}
	winner, lost := a, errB
	if errA != nil {
		winner, lost = b, errA
	}
	wantErr(t, "the second Set", lost, stash.ErrConflict)
	if got := mustGet(t, tb, id); got.Version != 2 || jsonOf(t, got.Value) != jsonOf(t, winner.Value) {
		t.Fatalf("stored %+v; want the winner's value at version 2", got)
	}
	// A struct the caller built is saved only at the stored version.
	built := &stash.Stash{StashID: id, Name: "cfg", StashType: stash.TypeContext, Value: map[string]any{"v": "c"}, Version: 1}
	wantErr(t, "a built struct at an old version", tb.Set(id, built), stash.ErrConflict)
	built.Version = 2
	if err := tb.Set(id, built); err != nil || built.Version != 3 {
		t.Fatalf("a built struct at the stored version: %v, version %d", err, built.Version)
	}
}

func TestR5_2IncrementAddsDelta(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	s := mustCreate(t, tb, "n", stash.TypeCounter, map[string]any{"value": 10})
	for _, c := range []struct{ delta, want int64 }{{5, 15}, {-20, -5}, {0, -5}} {
		got, err := s.Increment(c.delta)
		if err != nil || got != c.want {
			t.Fatalf("Increment(%d) = %d, %v; want %d", c.delta, got, err, c.want)
		}
		if err := tb.Set(s.StashID, s); err != nil {
			t.Fatal(err)
		}
	}
	if got := jsonOf(t, mustGet(t, tb, s.StashID).Value); got != `{"value":-5}` {
		t.Fatalf("stored %s", got)
	}
	big := mustCreate(t, tb, "big", stash.TypeCounter, map[string]any{"value": int64(math.MaxInt64 - 1)})
	if n, err := big.Increment(1); err != nil || n != math.MaxInt64 {
		t.Fatalf("to MaxInt64: %d, %v", n, err)
	}
	_, err := big.Increment(1)
	wantErr(t, "overflow", err, stash.ErrInvalidValue)
	if err := tb.Set(big.StashID, big); err != nil {
		t.Fatal(err)
	}
	if got := jsonOf(t, mustGet(t, tb, big.StashID).Value); got != `{"value":9223372036854775807}` {
		t.Fatalf("MaxInt64 stored as %s", got)
	}
}

// TestR5_2FiftyGoroutinesIncrementOneCounter: each reads, increments and
// saves, retrying on ErrConflict; no increment is lost or doubled.
func TestR5_2FiftyGoroutinesIncrementOneCounter(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	id := mustCreate(t, tb, "hits", stash.TypeCounter, nil).StashID
	const workers, each = 50, 2
	var conflicts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for range each {
				if err := incrementWithRetry(tb, id, &conflicts); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustGet(t, tb, id)
	if jsonOf(t, got.Value) != `{"value":100}` || got.Version != 1+workers*each {
		t.Fatalf("counter %s at version %d; want 100 at %d", jsonOf(t, got.Value), got.Version, 1+workers*each)
	}
	t.Logf("%d increments, %d conflicts retried", workers*each, conflicts.Load())
}

// incrementWithRetry is the PRD's R5.3 loop with a retry on ErrConflict.
func incrementWithRetry(tb *stash.Table, id string, conflicts *atomic.Int64) error {
	for {
		e, err := tb.Get(id)
		if err != nil {
			return err
		}
		s := e.(*stash.Stash)
		if _, err := s.Increment(1); err != nil {
			return err
		}
		err = tb.Set(s.StashID, s)
		if !errors.Is(err, stash.ErrConflict) {
			return err
		}
		conflicts.Add(1)
		time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond) // spread the retries
	}
}
