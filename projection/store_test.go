package projection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/testenv"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC)

// event returns a valid event of key at version: a put of value, or a
// delete or expire when value is "".
func event(tb testing.TB, kind contract.Kind, key string, version int64, value string) contract.Event {
	tb.Helper()
	k, err := contract.ParseKey(key)
	if err != nil {
		tb.Fatalf("bad test key: %v", err)
	}
	e := contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           key,
		Scope:         k.Scope(),
		Version:       version,
		PrevVersion:   version - 1,
		Kind:          kind,
		CreatedAt:     t0,
		Semantics:     contract.Semantics{Purpose: "checkpoint", Producer: "test", ConsumerHints: []string{"x"}, TTLSeconds: 0},
		SpecRef:       "spec/1",
		RequestID:     fmt.Sprintf("req-%d", version),
		RequestDigest: fmt.Sprintf("digest-%d", version),
		Principal:     "alice",
		TS:            t0.Add(time.Duration(version) * time.Second),
		WriterEpoch:   1,
	}
	switch kind {
	case contract.KindPut:
		e.Op = contract.OpSet
		e.After = json.RawMessage(value)
	case contract.KindDelete:
		e.Op = contract.OpDelete
	case contract.KindExpire:
		e.Op = contract.OpExpire
	}
	return e
}

func put(tb testing.TB, key string, version int64, value string) contract.Event {
	tb.Helper()
	return event(tb, contract.KindPut, key, version, value)
}

// batchOf numbers events on partition 0 from offset first.
func batchOf(first int64, evs ...contract.Event) []projection.Applied {
	out := make([]projection.Applied, len(evs))
	for i, e := range evs {
		out[i] = projection.Applied{Partition: 0, Offset: first + int64(i), Event: e}
	}
	return out
}

func mustApply(tb testing.TB, s *projection.Store, topic string, batch []projection.Applied) {
	tb.Helper()
	if err := s.Apply(context.Background(), topic, batch); err != nil {
		tb.Fatalf("apply: %v", err)
	}
}

func mustState(tb testing.TB, s *projection.Store, key string) keystate.State {
	tb.Helper()
	st, err := s.State(context.Background(), key)
	if err != nil {
		tb.Fatalf("state %s: %v", key, err)
	}
	return st
}

// historyVersions returns the versions kv_history holds for key, in order.
func historyVersions(tb testing.TB, pool *pgxpool.Pool, key string) []int64 {
	tb.Helper()
	rows, err := pool.Query(context.Background(), `SELECT version FROM kv_history WHERE key = $1 ORDER BY version`, key)
	if err != nil {
		tb.Fatalf("history: %v", err)
	}
	var out []int64
	var v int64
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			tb.Fatalf("history: %v", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		tb.Fatalf("history: %v", err)
	}
	return out
}

func TestApply(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)

	tests := []struct {
		name    string
		batches func(key string) [][]contract.Event
		// want is the event whose State the projection must equal.
		want    func(key string) contract.Event
		history []int64
	}{
		{
			name:    "PutCreatesLiveEntry",
			batches: func(k string) [][]contract.Event { return [][]contract.Event{{put(t, k, 1, `{"b":1,"a":[1, 2]}`)}} },
			want:    func(k string) contract.Event { return put(t, k, 1, `{"b":1,"a":[1, 2]}`) },
			history: []int64{1},
		},
		{
			name: "ReplayedBatchIsNoOp",
			batches: func(k string) [][]contract.Event {
				b := []contract.Event{put(t, k, 1, `1`), put(t, k, 2, `2`)}
				return [][]contract.Event{b, b}
			},
			want:    func(k string) contract.Event { return put(t, k, 2, `2`) },
			history: []int64{1, 2},
		},
		{
			name: "OlderVersionAfterNewerIsIgnored",
			batches: func(k string) [][]contract.Event {
				return [][]contract.Event{{put(t, k, 1, `1`), put(t, k, 2, `2`)}, {put(t, k, 1, `"stale"`)}}
			},
			want:    func(k string) contract.Event { return put(t, k, 2, `2`) },
			history: []int64{1, 2},
		},
		{
			name: "SeveralVersionsInOneBatchFoldToLatest",
			batches: func(k string) [][]contract.Event {
				return [][]contract.Event{{put(t, k, 1, `1`), put(t, k, 2, `2`), put(t, k, 3, `3`)}}
			},
			want:    func(k string) contract.Event { return put(t, k, 3, `3`) },
			history: []int64{1, 2, 3},
		},
		{
			name: "DeleteKeepsVersionAndHidesEntry",
			batches: func(k string) [][]contract.Event {
				return [][]contract.Event{{put(t, k, 1, `1`)}, {event(t, contract.KindDelete, k, 2, "")}}
			},
			want:    func(k string) contract.Event { return event(t, contract.KindDelete, k, 2, "") },
			history: []int64{1, 2},
		},
		{
			name: "ExpireKeepsVersionAndHidesEntry",
			batches: func(k string) [][]contract.Event {
				return [][]contract.Event{{put(t, k, 1, `1`), event(t, contract.KindExpire, k, 2, "")}}
			},
			want:    func(k string) contract.Event { return event(t, contract.KindExpire, k, 2, "") },
			history: []int64{1, 2},
		},
		{
			name: "RecreateContinuesVersion",
			batches: func(k string) [][]contract.Event {
				return [][]contract.Event{{put(t, k, 1, `1`), event(t, contract.KindDelete, k, 2, "")}, {put(t, k, 3, `"again"`)}}
			},
			want:    func(k string) contract.Event { return put(t, k, 3, `"again"`) },
			history: []int64{1, 2, 3},
		},
		{
			name:    "NullValueIsLive",
			batches: func(k string) [][]contract.Event { return [][]contract.Event{{put(t, k, 1, `null`)}} },
			want:    func(k string) contract.Event { return put(t, k, 1, `null`) },
			history: []int64{1},
		},
		{
			name: "ExpiryIsKept",
			batches: func(k string) [][]contract.Event {
				e := put(t, k, 1, `true`)
				exp := t0.Add(time.Hour)
				e.ExpiresAt = &exp
				e.Semantics.TTLSeconds = 3600
				return [][]contract.Event{{e}}
			},
			want: func(k string) contract.Event {
				e := put(t, k, 1, `true`)
				exp := t0.Add(time.Hour)
				e.ExpiresAt = &exp
				e.Semantics.TTLSeconds = 3600
				return e
			},
			history: []int64{1},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("tenant/t/project/apply%d/key", i)
			topic := fmt.Sprintf("topic-%d", i)
			var offset int64
			for _, b := range tt.batches(key) {
				mustApply(t, s, topic, batchOf(offset, b...))
				offset += int64(len(b))
			}
			w := tt.want(key)
			if got, want := mustState(t, s, key), keystate.FromEvent(&w); !reflect.DeepEqual(got, want) {
				t.Errorf("state:\n got %+v\nwant %+v", got, want)
			}
			if got := historyVersions(t, pool, key); !slices.Equal(got, tt.history) {
				t.Errorf("history versions %v, want %v", got, tt.history)
			}
		})
	}
}

func TestApplyHistoryKeepsEveryEvent(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	key := "tenant/t/project/p/h"
	e1, e2 := put(t, key, 1, `{"n":1}`), event(t, contract.KindDelete, key, 2, "")
	mustApply(t, s, "kv.changes", []projection.Applied{{Partition: 3, Offset: 10, Event: e1}, {Partition: 3, Offset: 11, Event: e2}})

	rows, err := pool.Query(context.Background(),
		`SELECT kind, op, partition, kafka_offset, coalesce(event, event_text::jsonb) FROM kv_history WHERE key = $1 ORDER BY version`, key)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	// jsonb keeps the event's meaning, not its bytes (key order and
	// spacing of values may change): compare decoded JSON.
	var got []any
	for rows.Next() {
		var kind, op string
		var part int32
		var off int64
		var raw []byte
		if err := rows.Scan(&kind, &op, &part, &off, &raw); err != nil {
			t.Fatal(err)
		}
		e, err := codec.UnmarshalEvent(raw)
		if err != nil {
			t.Fatalf("stored event does not decode: %v", err)
		}
		if kind != string(e.Kind) || op != string(e.Op) || part != 3 || off != 10+int64(len(got)) {
			t.Errorf("row columns kind=%s op=%s partition=%d offset=%d disagree with event %+v", kind, op, part, off, e)
		}
		got = append(got, generic(t, raw))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var want []any
	for _, e := range []contract.Event{e1, e2} {
		b, err := codec.MarshalEvent(&e)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, generic(t, b))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("history events:\n got %v\nwant %v", got, want)
	}
}

func generic(tb testing.TB, b []byte) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestApplyOffsets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := projection.New(testenv.MustPostgres(t))
	const topic = "kv.changes"
	at := func(p int32, o int64, e contract.Event) projection.Applied {
		return projection.Applied{Partition: p, Offset: o, Event: e}
	}
	k := func(i int) string { return fmt.Sprintf("tenant/t/project/p/k%d", i) }
	invalid := put(t, k(6), 1, `1`)
	invalid.Version = 0

	steps := []struct {
		name    string
		batch   []projection.Applied
		wantErr bool
		want    map[int32]int64
	}{
		{
			name:  "MaxOffsetPlusOnePerPartition",
			batch: []projection.Applied{at(0, 5, put(t, k(1), 1, `1`)), at(0, 7, put(t, k(2), 1, `1`)), at(1, 3, put(t, k(3), 1, `1`))},
			want:  map[int32]int64{0: 8, 1: 4},
		},
		{
			name:  "OlderOffsetsDoNotRegress",
			batch: []projection.Applied{at(0, 2, put(t, k(1), 1, `1`)), at(2, 0, put(t, k(4), 1, `1`))},
			want:  map[int32]int64{0: 8, 1: 4, 2: 1},
		},
		{
			name:  "NewerOffsetsAdvance",
			batch: []projection.Applied{at(1, 9, put(t, k(3), 2, `2`))},
			want:  map[int32]int64{0: 8, 1: 10, 2: 1},
		},
		{
			// Version 0 breaks a CHECK constraint: the whole transaction
			// rolls back, offsets included.
			name:    "FailedBatchStoresNothing",
			batch:   []projection.Applied{at(0, 20, put(t, k(5), 1, `1`)), at(0, 21, invalid)},
			wantErr: true,
			want:    map[int32]int64{0: 8, 1: 10, 2: 1},
		},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			err := s.Apply(ctx, topic, st.batch)
			if (err != nil) != st.wantErr {
				t.Fatalf("apply error %v, want error %v", err, st.wantErr)
			}
			got, err := s.Offsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, st.want) {
				t.Errorf("offsets %v, want %v", got, st.want)
			}
			// Offset reads one partition of the same table; 3 was
			// never applied.
			for p := range int32(4) {
				if o, err := s.Offset(ctx, topic, p); err != nil || o != st.want[p] {
					t.Errorf("Offset(partition %d) = %d, %v; want %d", p, o, err, st.want[p])
				}
			}
			if st.wantErr {
				if v := mustState(t, s, k(5)); v.Version != 0 {
					t.Errorf("entry of the failed batch is stored: %+v", v)
				}
			}
		})
	}
	if other, err := s.Offsets(ctx, "other"); err != nil || len(other) != 0 {
		t.Errorf("offsets of another topic: %v, %v; want none", other, err)
	}
}

func TestStates(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	live, gone, never := "tenant/t/project/p/live", "tenant/t/project/p/gone", "tenant/t/project/p/never"
	pLive, dGone := put(t, live, 4, `"v"`), event(t, contract.KindDelete, gone, 2, "")
	mustApply(t, s, "kv.changes", batchOf(0, put(t, gone, 1, `1`), dGone, pLive))

	got, err := s.States(context.Background(), []string{live, gone, never})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]keystate.State{live: keystate.FromEvent(&pLive), gone: keystate.FromEvent(&dGone), never: {}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("states:\n got %+v\nwant %+v", got, want)
	}
	if st := mustState(t, s, never); st.Version != 0 || st.Live {
		t.Errorf("absent key: %+v, want version 0, not live", st)
	}
	empty, err := s.States(context.Background(), nil)
	if err != nil || len(empty) != 0 {
		t.Errorf("no keys: %v, %v", empty, err)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	now := t0.Add(24 * time.Hour)
	const p = "tenant/t/project/p/"
	expiring := func(key string, at time.Time) contract.Event {
		e := put(t, key, 1, `"e"`)
		e.ExpiresAt = &at
		return e
	}
	mustApply(t, s, "kv.changes", batchOf(0,
		put(t, p+"b", 1, `{"z":1,"a":2}`),
		put(t, p+"a/c", 1, `1`),
		put(t, p+"a-b", 1, `1`),
		put(t, p+"a/b", 1, `1`),
		put(t, p+"a.x", 1, `1`),
		put(t, p+"deleted", 1, `1`),
		event(t, contract.KindDelete, p+"deleted", 2, ""),
		expiring(p+"expired", now.Add(-time.Second)),
		expiring(p+"expires-now", now),
		expiring(p+"future", now.Add(time.Second)),
		put(t, "tenant/t/project/q/a", 1, `1`),
		put(t, "tenant/t/project/pp/a", 1, `1`),
	))

	all := []string{"a-b", "a.x", "a/b", "a/c", "b", "future"}
	tests := []struct {
		name          string
		prefix, after string
		limit         int
		want          []string // without the prefix p
		truncated     bool
	}{
		{name: "LiveUnexpiredInByteOrder", prefix: p, limit: 100, want: all},
		{name: "PartialComponentPrefix", prefix: p + "a", limit: 100, want: []string{"a-b", "a.x", "a/b", "a/c"}},
		{name: "DirectoryPrefix", prefix: p + "a/", limit: 100, want: []string{"a/b", "a/c"}},
		{name: "LimitTruncates", prefix: p, limit: 2, want: []string{"a-b", "a.x"}, truncated: true},
		{name: "CursorContinues", prefix: p, after: p + "a.x", limit: 2, want: []string{"a/b", "a/c"}, truncated: true},
		{name: "LastPageNotTruncated", prefix: p, after: p + "a/c", limit: 2, want: []string{"b", "future"}},
		{name: "ExactLimitNotTruncated", prefix: p, limit: len(all), want: all},
		{name: "CursorBeforePrefix", prefix: p + "a/", after: "tenant/a", limit: 100, want: []string{"a/b", "a/c"}},
		{name: "NoMatch", prefix: p + "zzz", limit: 10, want: []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entries, truncated, err := s.List(context.Background(), tt.prefix, projection.Page{After: tt.after, Limit: tt.limit, MaxBytes: noBudget, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, e := range entries {
				got = append(got, e.Key[len(p):])
			}
			if !slices.Equal(got, tt.want) || truncated != tt.truncated {
				t.Errorf("got %v truncated=%v, want %v truncated=%v", got, truncated, tt.want, tt.truncated)
			}
		})
	}

	t.Run("EntriesAreComplete", func(t *testing.T) {
		entries, _, err := s.List(context.Background(), p+"b", projection.Page{Limit: 1, MaxBytes: noBudget, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		e := put(t, p+"b", 1, `{"z":1,"a":2}`)
		want := e.Entry()
		if len(entries) != 1 || !reflect.DeepEqual(entries[0], want) {
			t.Errorf("got %+v, want %+v (value bytes as written)", entries, want)
		}
	})
	t.Run("ErrCursorNUL", func(t *testing.T) {
		for _, list := range []func() error{
			func() error {
				_, _, err := s.List(context.Background(), p, projection.Page{After: p + "a\x00", Limit: 10, MaxBytes: noBudget, Now: now})
				return err
			},
			func() error {
				_, _, err := s.Scan(context.Background(), p, projection.Filter{Field: "a", Op: contract.FilterEq, Value: []byte("1")}, projection.Page{After: p + "a\x00", Limit: 10, MaxBytes: noBudget, Now: now})
				return err
			},
		} {
			if err := list(); contract.ErrorCode(err) != contract.EInvalid || strings.Contains(err.Error(), "postgres") {
				t.Errorf("error %v, want code %s without the driver's words", err, contract.EInvalid)
			}
		}
	})
	t.Run("NULPrefixMatchesNothing", func(t *testing.T) {
		if entries, _, err := s.List(context.Background(), p+"\x00", projection.Page{Limit: 10, MaxBytes: noBudget, Now: now}); err != nil || len(entries) != 0 {
			t.Errorf("got %v, %v; want nothing", entries, err)
		}
	})
	t.Run("ErrNonPositiveLimit", func(t *testing.T) {
		_, _, err := s.List(context.Background(), p, projection.Page{Limit: 0, MaxBytes: noBudget, Now: now})
		if contract.ErrorCode(err) != contract.EInvalid {
			t.Errorf("error %v, want code %s", err, contract.EInvalid)
		}
	})
}

// seed writes n keys under prefix, in batches like the projector's.
func seed(tb testing.TB, s *projection.Store, prefix string, n int) {
	tb.Helper()
	var batch []contract.Event
	for i := range n {
		batch = append(batch, put(tb, fmt.Sprintf("%s%06d", prefix, i), 1, `{"cursor":12345,"owner":"worker-7"}`))
		if len(batch) == 500 || i == n-1 {
			mustApply(tb, s, "kv.changes", batchOf(int64(i), batch...))
			batch = batch[:0]
		}
	}
}

func BenchmarkList1000(b *testing.B) {
	s := projection.New(testenv.MustPostgres(b))
	seed(b, s, "tenant/t/project/bench/k/", 1000)
	seed(b, s, "tenant/t/project/other/k/", 5000)
	ctx := context.Background()
	now := time.Now()
	b.ResetTimer()
	for b.Loop() {
		entries, truncated, err := s.List(ctx, "tenant/t/project/bench/", projection.Page{Limit: 1000, MaxBytes: noBudget, Now: now})
		if err != nil || len(entries) != 1000 || truncated {
			b.Fatalf("list: %d entries, truncated %v, %v", len(entries), truncated, err)
		}
	}
}

func BenchmarkState(b *testing.B) {
	s := projection.New(testenv.MustPostgres(b))
	seed(b, s, "tenant/t/project/bench/k/", 5000)
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		st, err := s.State(ctx, "tenant/t/project/bench/k/002500")
		if err != nil || !st.Live {
			b.Fatalf("state: %+v, %v", st, err)
		}
	}
}

// BenchmarkApply500 applies batches of 500 new versions of 500 keys (one
// projector transaction each): plain values, and objects whose top-level
// fields the projection derives for filtered scans.
func BenchmarkApply500(b *testing.B) {
	for _, bc := range []struct {
		name  string
		value func(version int64) string
	}{
		{"Plain", func(int64) string { return `{"cursor":12345}` }},
		{"Fields", func(version int64) string {
			return fmt.Sprintf(`{"state":"running","attempt":%d,"owner":"worker-7","updated_at":"2026-03-04T05:06:07Z"}`, version)
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := projection.New(testenv.MustPostgres(b))
			ctx := context.Background()
			batch := make([]projection.Applied, 500)
			var offset int64
			version := int64(0)
			for b.Loop() {
				version++
				for i := range batch {
					batch[i] = projection.Applied{Partition: int32(i % 12), Offset: offset,
						Event: put(b, fmt.Sprintf("tenant/t/project/p%d/k%d", i%12, i), version, bc.value(version))}
					offset++
				}
				if err := s.Apply(ctx, "kv.changes", batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(batch)), "ns/event")
		})
	}
}

// TestStatesAndRequests: the newest projected event of a key that carried
// a requestId is found with its version and digest, also under another
// key's same requestId and when the requestId came back later; events
// without a requestId and unknown pairs are absent; the states come
// with it, as States gives them.
// withoutAt is applied without the times, which compare with Equal.
func withoutAt(applied map[projection.RequestRef]projection.AppliedRequest) map[projection.RequestRef]projection.AppliedRequest {
	out := make(map[projection.RequestRef]projection.AppliedRequest, len(applied))
	for r, a := range applied {
		a.At = time.Time{}
		out[r] = a
	}
	return out
}

func TestStatesAndRequests(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	a, b := "tenant/t/project/p/a", "tenant/t/project/p/b"
	a1, a2, a3 := put(t, a, 1, `1`), put(t, a, 2, `2`), event(t, contract.KindExpire, a, 3, "")
	a3.RequestID, a3.RequestDigest = "", ""
	a4 := put(t, a, 4, `4`)
	a4.RequestID, a4.RequestDigest = "req-1", "digest-again"
	b1 := put(t, b, 1, `1`)
	b1.RequestID = "req-2"
	mustApply(t, s, "kv.changes", batchOf(0, a1, a2, a3, a4, b1))

	ref := func(k, id string) projection.RequestRef { return projection.RequestRef{Key: k, RequestID: id} }
	never := "tenant/t/project/p/never"
	states, got, err := s.StatesAndRequests(context.Background(), []string{a, never},
		[]projection.RequestRef{ref(a, "req-1"), ref(a, "req-2"), ref(a, "req-3"), ref(b, "req-2"), ref(never, "req-1"), ref(a, "")})
	if err != nil {
		t.Fatal(err)
	}
	want := map[projection.RequestRef]projection.AppliedRequest{
		ref(a, "req-1"): {Version: 4, Digest: "digest-again", At: a4.TS},
		ref(a, "req-2"): {Version: 2, Digest: "digest-2", At: a2.TS},
		ref(b, "req-2"): {Version: 1, Digest: "digest-1", At: b1.TS},
	}
	for r, w := range want { // the time of the event: a requestId is remembered for a time
		if !got[r].At.Equal(w.At) {
			t.Errorf("%v at %v, want %v", r, got[r].At, w.At)
		}
	}
	if !reflect.DeepEqual(withoutAt(got), withoutAt(want)) {
		t.Errorf("applied requests:\n got %+v\nwant %+v", got, want)
	}
	if wantStates := map[string]keystate.State{a: keystate.FromEvent(&a4), never: {}}; !reflect.DeepEqual(states, wantStates) {
		t.Errorf("states:\n got %+v\nwant %+v", states, wantStates)
	}
	if _, only, err := s.StatesAndRequests(context.Background(), nil, []projection.RequestRef{ref(b, "req-2")}); err != nil || len(only) != 1 {
		t.Errorf("refs without keys: %v, %v", only, err)
	}

	// The lookup is an index probe per pair and row format
	// (kv_history_request for the rows written since migration 00011,
	// kv_history_request_id for the older ones), not a scan of the key's
	// history.
	plan := projection.ExplainRequests(t, pool, a, "req-1")
	for _, index := range []string{"kv_history_request ", "kv_history_request_id"} {
		if !strings.Contains(plan, index) {
			t.Errorf("the lookup does not use %s:\n%s", index, plan)
		}
	}
}

func TestApplyHistoryStoresRawAsTheEvent(t *testing.T) {
	t.Parallel()
	// A record's value as it came (Applied.Raw) is stored as the event, in
	// the Store's HistoryFormat: parsed into event (jsonb), the value of
	// its encoding, with no request_id; or its bytes in event_text
	// (migration 00011), and its requestId in request_id (NULL when it
	// carries none).
	for _, tc := range []struct {
		format projection.HistoryFormat
		// stored says whether row ($1, $2) holds the event $3 in the
		// format's column only, and returns its request_id.
		stored string
	}{
		{projection.HistoryJSONB, `SELECT event_text IS NULL AND event = $3::jsonb, request_id FROM kv_history WHERE key = $1 AND version = $2`},
		{projection.HistoryText, `SELECT event IS NULL AND event_text = $3, request_id FROM kv_history WHERE key = $1 AND version = $2`},
	} {
		t.Run(tc.format.String(), func(t *testing.T) {
			pool := testenv.MustPostgres(t)
			s := projection.New(pool)
			s.SetHistoryFormat(tc.format)
			key := "tenant/t/project/p/raw"
			e := put(t, key, 1, `{"n":"<\u00e9>"}`)
			enc, err := codec.MarshalEvent(&e)
			if err != nil {
				t.Fatal(err)
			}
			var spaced bytes.Buffer
			if err := json.Indent(&spaced, enc, "", "  "); err != nil {
				t.Fatal(err)
			}
			// (A member the event does not have marks the raw bytes as stored.)
			raw := append([]byte(`{"rawMark":true,`), spaced.Bytes()[1:]...)
			noID := put(t, key, 2, `{"n":2}`)
			noID.RequestID, noID.RequestDigest = "", ""
			encNoID, err := codec.MarshalEvent(&noID)
			if err != nil {
				t.Fatal(err)
			}
			mustApply(t, s, "kv.changes", []projection.Applied{{Partition: 0, Offset: 1, Event: e, Raw: raw}, {Partition: 0, Offset: 2, Event: noID}})

			for _, want := range []struct {
				version int64
				event   []byte
				rid     string
			}{{1, raw, e.RequestID}, {2, encNoID, ""}} {
				if tc.format == projection.HistoryJSONB {
					want.rid = ""
				}
				var ok bool
				var rid *string
				if err := pool.QueryRow(context.Background(), tc.stored, key, want.version, string(want.event)).Scan(&ok, &rid); err != nil {
					t.Fatal(err)
				}
				if !ok {
					t.Errorf("version %d: kv_history does not hold %s as %s", want.version, want.event, tc.format)
				}
				if (rid != nil) != (want.rid != "") || rid != nil && *rid != want.rid {
					t.Errorf("version %d: request_id %v, want %q (NULL when empty)", want.version, rid, want.rid)
				}
			}
		})
	}
}
