package projection_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// atLog is a partition's log for the reads of the past: keys a, b, c
// under atPrefix, one event per offset, event time t0 + offset seconds
// except offset 3, stamped like offset 2 (a tie). b expires by time at
// t0+3.5s and by its expire event at offset 5.
func atLog(t *testing.T) []projection.Applied {
	t.Helper()
	exp := t0.Add(3500 * time.Millisecond)
	b1 := put(t, atPrefix+"b", 1, `"b1"`)
	b1.ExpiresAt = &exp
	evs := batchOf(0,
		put(t, atPrefix+"a", 1, `{"v":1}`), b1, put(t, atPrefix+"a", 2, `{"v":2}`), put(t, atPrefix+"c", 1, `"c1"`),
		event(t, contract.KindDelete, atPrefix+"a", 3, ""), event(t, contract.KindExpire, atPrefix+"b", 2, ""),
		put(t, atPrefix+"a", 4, `{"v":4}`))
	for i := range evs {
		evs[i].Event.TS = t0.Add(time.Duration(i) * time.Second)
	}
	evs[3].Event.TS = evs[2].Event.TS
	return evs
}

const atPrefix = "tenant/t/project/p/at/"

// foldAt is what a read at offset (and time, when not nil) must see of
// key: the value of its newest event at or before offset, "" when that
// event is not a put or its expiry is at or before the time.
func foldAt(log []projection.Applied, key string, offset int64, at *time.Time) string {
	var last *contract.Event
	for i := range log {
		if log[i].Offset <= offset && log[i].Event.Key == key {
			last = &log[i].Event
		}
	}
	if last == nil || !last.Live() || (at != nil && last.ExpiresAt != nil && !last.ExpiresAt.After(*at)) {
		return ""
	}
	return string(last.After)
}

// TestReadsAt: EntryAsOf and PageAsOf at every offset of a log, by position
// and by time, equal the fold of the log up to there (foldAt); a time
// resolves to the latest event at or before it, ties included.
func TestReadsAt(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	log := atLog(t)
	mustApply(t, s, "kv.changes", log)
	ctx := context.Background()
	for off := int64(-1); off <= 6; off++ {
		for _, tm := range []*time.Time{nil, ptrTo(t0.Add(time.Duration(off)*time.Second + 500*time.Millisecond))} {
			at := projection.AsOf{Partition: 0, Offset: off, Time: tm}
			if tm != nil {
				pos, err := s.OffsetAtTime(ctx, 0, *tm)
				want := off
				if off == 2 {
					want = 3 // offset 3 has offset 2's time
				}
				if err != nil || pos != want {
					t.Fatalf("OffsetAtTime(%s) = %d, %v; want %d", tm, pos, err, want)
				}
				at.Offset = pos
			}
			var want []string
			for _, k := range []string{"a", "b", "c"} {
				v := foldAt(log, atPrefix+k, at.Offset, tm)
				e, err := s.EntryAsOf(ctx, atPrefix+k, at)
				if err != nil {
					t.Fatal(err)
				}
				if got := entryValue(e); got != v {
					t.Errorf("EntryAsOf(%s, %d, %v) = %s, want %s", k, at.Offset, tm, got, v)
				}
				if v != "" {
					want = append(want, k+"="+v)
				}
			}
			if got := pageAt(t, s, at, 100); got != strings.Join(want, " ") {
				t.Errorf("PageAsOf(%d, %v) = %s, want %s", at.Offset, tm, got, strings.Join(want, " "))
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

func entryValue(e *contract.Entry) string {
	if e == nil {
		return ""
	}
	return string(e.Value)
}

// pageAt lists atPrefix at at, pages of limit, as "k=value ...".
func pageAt(t *testing.T, s *projection.Store, at projection.AsOf, limit int) string {
	t.Helper()
	var out []string
	after := ""
	for {
		es, truncated, err := s.PageAsOf(context.Background(), atPrefix, nil, at, projection.Page{After: after, Limit: limit, MaxBytes: 1 << 20})
		if err != nil {
			t.Fatalf("PageAsOf(%d): %v", at.Offset, err)
		}
		for _, e := range es {
			out = append(out, strings.TrimPrefix(e.Key, atPrefix)+"="+string(e.Value))
		}
		if !truncated {
			return strings.Join(out, " ")
		}
		after = es[len(es)-1].Key
	}
}

// TestReadsAtRetention: once the retention removed a key's older
// versions, a read at a position before its oldest kept one is
// cursor_expired (field at), EntryAsOf and PageAsOf alike; at or after it,
// and for keys whose history is whole (c: version 1 kept), reads answer.
// Pages of one entry page through the keys as one page does.
func TestReadsAtRetention(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	log := atLog(t)
	mustApply(t, s, "kv.changes", log)
	ctx := context.Background()
	if got, want := pageAt(t, s, projection.AsOf{Offset: 3}, 1), pageAt(t, s, projection.AsOf{Offset: 3}, 100); got != want {
		t.Errorf("pages of 1 = %s, one page = %s", got, want)
	}
	if _, err := s.PruneHistory(ctx, projection.Retention{MaxVersions: 1}, t0, projection.PruneBatch{Keys: 10, Rows: 10}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key     string
		offset  int64
		expired bool
	}{
		{"a", 5, true}, {"a", 6, false}, {"b", 4, true}, {"b", 5, false}, {"c", -1, false}, {"c", 3, false},
	} {
		e, err := s.EntryAsOf(ctx, atPrefix+tc.key, projection.AsOf{Offset: tc.offset})
		if tc.expired != (contract.ErrorCode(err) == contract.ECursorExpired) {
			t.Errorf("EntryAsOf(%s, %d) = %v, %v; cursor_expired %t", tc.key, tc.offset, e, err, tc.expired)
		}
		var ce *contract.Error
		if tc.expired && (!errors.As(err, &ce) || ce.Field != "at") {
			t.Errorf("EntryAsOf(%s, %d): %v, want field at", tc.key, tc.offset, err)
		}
	}
	_, _, err := s.PageAsOf(ctx, atPrefix, nil, projection.AsOf{Offset: 5}, projection.Page{Limit: 10, MaxBytes: 1 << 20})
	if contract.ErrorCode(err) != contract.ECursorExpired {
		t.Errorf("PageAsOf(5) after retention: %v, want cursor_expired", err)
	}
	if got := pageAt(t, s, projection.AsOf{Offset: 6}, 1); got != `a={"v":4} c="c1"` {
		t.Errorf("PageAsOf(6) after retention = %s", got)
	}
}

// TestReadsAtGap: a version missing between two kept ones (a projection
// rebuilt from the compacted topic, which keeps a collection's latest
// event per element; an age retention across a clock stepped back)
// makes the points between them cursor_expired, key and page alike, but
// not the kept event's own offset nor the points after the gap.
func TestReadsAtGap(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	const k = atPrefix + "gap"
	mustApply(t, s, "kv.changes", batchOf(0, put(t, k, 1, `1`), put(t, atPrefix+"other", 1, `0`), put(t, k, 2, `2`), put(t, k, 3, `3`)))
	if _, err := pool.Exec(context.Background(), `DELETE FROM kv_history WHERE key = $1 AND version = 2`, k); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for off, want := range []string{"1", "expired", "expired", "3"} {
		e, err := s.EntryAsOf(ctx, k, projection.AsOf{Offset: int64(off)})
		got := entryValue(e)
		if contract.ErrorCode(err) == contract.ECursorExpired {
			got = "expired"
		} else if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("EntryAsOf(%d) = %s, want %s", off, got, want)
		}
		_, _, err = s.PageAsOf(ctx, atPrefix, nil, projection.AsOf{Offset: int64(off)}, projection.Page{Limit: 10, MaxBytes: 1 << 20})
		if (contract.ErrorCode(err) == contract.ECursorExpired) != (want == "expired") {
			t.Errorf("PageAsOf(%d): %v", off, err)
		}
	}
}

// BenchmarkPageAsOf1000 lists 1,000 keys of 10 versions each (and 5,000
// keys of another scope) as of the position after their fifth versions,
// in one page, by position and by time; it reports the median.
func BenchmarkPageAsOf1000(b *testing.B) {
	s := projection.New(testenv.MustPostgres(b))
	const p = "tenant/t/project/bench/k/"
	for v := int64(1); v <= 10; v++ {
		var evs []contract.Event
		for i := range 1000 {
			e := put(b, fmt.Sprintf("%s%06d", p, i), v, `{"cursor":12345,"owner":"worker-7"}`)
			e.TS = t0.Add(time.Duration(v) * time.Second)
			evs = append(evs, e)
		}
		for i := 0; i < len(evs); i += 500 {
			mustApply(b, s, "kv.changes", batchOf((v-1)*1000+int64(i), evs[i:i+500]...))
		}
	}
	seed(b, s, "tenant/t/project/other/k/", 5000)
	ctx := context.Background()
	at := t0.Add(5500 * time.Millisecond)
	for _, bc := range []struct {
		name string
		at   func() projection.AsOf
	}{
		{"Position", func() projection.AsOf { return projection.AsOf{Offset: 4999} }},
		{"Time", func() projection.AsOf {
			off, err := s.OffsetAtTime(ctx, 0, at)
			if err != nil || off != 4999 {
				b.Fatalf("OffsetAtTime: %d, %v", off, err)
			}
			return projection.AsOf{Offset: off, Time: &at}
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				entries, truncated, err := s.PageAsOf(ctx, "tenant/t/project/bench/", nil, bc.at(), projection.Page{Limit: 1000, MaxBytes: 1 << 30})
				took = append(took, time.Since(start))
				if err != nil || len(entries) != 1000 || truncated || entries[0].Version != 5 {
					b.Fatalf("page: %d entries, truncated %v, %v", len(entries), truncated, err)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
		})
	}
}

// TestPageAsOfPlan: a page as of a position walks kv_entries' primary key
// under the prefix and finds each key's event by one descent of
// kv_history_key_offset (migration 00015), not by the primary key's
// walk back over the later versions.
func TestPageAsOfPlan(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	mustApply(t, s, "kv.changes", atLog(t))
	plan := projection.ExplainPageAsOf(t, pool, atPrefix, 3, 100)
	for _, want := range []string{"kv_entries_pkey", "kv_history_key_offset"} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan does not use %s:\n%s", want, plan)
		}
	}
}
