package projection_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// activityOfRange is the activity of a range as the overview read it
// before Activities, one range and two statements at a time: the
// reference the batched statement must answer as.
func activityOfRange(tb testing.TB, pool *pgxpool.Pool, r projection.ActivityRange, since time.Time) projection.Activity {
	tb.Helper()
	var a projection.Activity
	if r.Range.Lo >= r.Range.Hi {
		return a
	}
	ctx := context.Background()
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM kv_history
    WHERE partition = $1 AND ts >= $2 AND key >= $3 AND key < $4`, r.Partition, since, r.Range.Lo, r.Range.Hi).Scan(&a.Writes); err != nil {
		tb.Fatalf("writes of %+v: %v", r, err)
	}
	var last *time.Time
	if err := pool.QueryRow(ctx, `SELECT max(updated_at) FROM kv_entries WHERE key >= $1 AND key < $2`, r.Range.Lo, r.Range.Hi).Scan(&last); err != nil {
		tb.Fatalf("last change of %+v: %v", r, err)
	}
	if last != nil {
		a.LastChange = last.UTC()
	}
	return a
}

// TestActivitiesAsPerRange: Activities answers, for every range of a
// page in one statement, what each range asked on its own answers:
// writes in and out of the window (an event at the window's start
// counts), a project without keys, one written only before the window,
// one whose last change is a delete, a part of a project (a grant on a
// path), one whose keys' events are spread over partitions (only the
// partition asked counts), the same range twice, and ranges that hold no
// key (empty, bounds not ASCII) — in the order asked.
func TestActivitiesAsPerRange(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	next := map[int32]int64{}
	apply := func(partition int32, evs ...contract.Event) {
		t.Helper()
		b := make([]projection.Applied, len(evs))
		for i, e := range evs {
			b[i] = projection.Applied{Partition: partition, Offset: next[partition], Event: e}
			next[partition]++
		}
		mustApply(t, s, "kv.changes", b)
	}
	// An event's ts is t0 plus its version in seconds (event).
	versions := func(key string, from, to int64) []contract.Event {
		var evs []contract.Event
		for v := from; v <= to; v++ {
			evs = append(evs, put(t, key, v, fmt.Sprint(v)))
		}
		return evs
	}
	const a, b, c, d = "tenant/t/project/a/", "tenant/t/project/b/", "tenant/t/project/c/", "tenant/u/project/d/"
	apply(1, versions(a+"k1", 1, 12)...)
	apply(1, versions(a+"k2", 1, 3)...)
	apply(1, versions(a+"sub/x", 1, 9)...)
	apply(1, versions(c+"old", 1, 4)...)
	apply(1, append(versions(c+"gone", 1, 5), event(t, contract.KindDelete, c+"gone", 6, ""))...)
	for p := int32(2); p <= 5; p++ {
		apply(p, versions(fmt.Sprintf("%sk%d", d, p), 1, int64(4*p))...)
	}
	apply(0, versions("tenant/t/project/ab/k", 1, 20)...) // after a's range, before b's
	since := t0.Add(6 * time.Second)                      // versions 6 on are in the window
	span := func(prefix string) projection.KeyRange {
		return projection.KeyRange{Lo: prefix, Hi: prefix[:len(prefix)-1] + "0"}
	}
	rs := []projection.ActivityRange{
		{Range: span(a), Partition: 1},
		{Range: span(b), Partition: 1},
		{Range: span(c), Partition: 1},
		{Range: span(a + "sub/"), Partition: 1},
		{Range: projection.KeyRange{Lo: a + "k1", Hi: a + "k1\x01"}, Partition: 1},
		{Range: span(d), Partition: 3},
		{Range: span(d), Partition: 5},
		{Range: span(d), Partition: 7},
		{Range: span(a), Partition: 1},
		{Range: projection.KeyRange{Lo: a, Hi: a}, Partition: 1},
		{Range: projection.KeyRange{Lo: b, Hi: a}, Partition: 1},
		{Range: projection.KeyRange{Lo: "tenant/t/project/é/", Hi: "tenant/t/project/é0"}, Partition: 1},
		{Range: span("tenant/t/project/ab/"), Partition: 0},
	}
	got, err := s.Activities(t.Context(), rs, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rs) {
		t.Fatalf("%d activities for %d ranges", len(got), len(rs))
	}
	for i, r := range rs {
		want := projection.Activity{}
		if !isASCII(r.Range.Lo) || !isASCII(r.Range.Hi) {
			// Never asked: the former Activity answered zero too.
		} else {
			want = activityOfRange(t, pool, r, since)
		}
		if got[i] != want {
			t.Errorf("range %d %+v: %+v, want %+v (per range)", i, r, got[i], want)
		}
	}
	// The cases the comparison stands on: they are not all zero.
	if got[0].Writes != 7+4 || got[1] != (projection.Activity{}) || got[2].Writes != 1 ||
		!got[2].LastChange.Equal(t0.Add(6*time.Second)) || got[5].Writes != 12-5 || got[7].Writes != 0 || got[7].LastChange.IsZero() {
		t.Errorf("activities %+v: want a 11 writes, b none, c 1 (its delete, the last change), d 7 in partition 3, none in 7 (but a last change)", got)
	}
	t.Logf("%d ranges in one statement, each as asked alone: a %+v, d@3 %+v", len(rs), got[0], got[5])
	if got, err := s.Activities(t.Context(), nil, since); err != nil || len(got) != 0 {
		t.Errorf("no range: %v %v, want none", got, err)
	}
}

// isASCII reports whether s holds only ASCII bytes (no NUL): the keys a
// range's bounds may be compared with.
func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 || s[i] == 0 {
			return false
		}
	}
	return true
}
