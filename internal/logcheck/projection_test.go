package logcheck_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestProjectionComparesUpToTheLogsEnd: the fold of the log as read is
// compared with every kv_entries row of an event before the log's end;
// a row of an event committed after the log was read (a sweeper's
// expiry, a round in flight) is counted, not reported as a difference,
// and a row the log cannot explain below its end still is.
func TestProjectionComparesUpToTheLogsEnd(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	store := projection.New(pool)
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	put := func(key string, version int64, value string) contract.Event {
		k, err := contract.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return contract.Event{SchemaVersion: contract.SchemaVersion, Key: key, Scope: k.Scope(), Version: version, PrevVersion: version - 1,
			Kind: contract.KindPut, Op: contract.OpSet, After: json.RawMessage(value), CreatedAt: t0, TS: t0, Principal: "test",
			RequestID: fmt.Sprintf("r-%s-%d", key, version), WriterEpoch: 1}
	}
	const a, b, c = "tenant/t/project/p/a", "tenant/t/project/p/b", "tenant/t/project/p/c"
	evs := []contract.Event{put(a, 1, `1`), put(b, 1, `1`), put(b, 2, `2`), put(c, 1, `1`)}
	var applied []projection.Applied
	var logged []logcheck.Event
	for i, e := range evs {
		applied = append(applied, projection.Applied{Partition: 0, Offset: int64(i), Event: e})
		logged = append(logged, logcheck.Event{Partition: 0, Offset: int64(i), Event: e})
	}
	if err := store.Apply(t.Context(), "kv.changes", applied); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		l           *logcheck.Log
		diffs       []string
		notCompared int
	}{
		{"OKWholeLog", &logcheck.Log{Events: logged, End: map[int32]int64{0: 4}}, nil, 0},
		// The log was read before b's version 2 and c committed: their
		// rows are past its end.
		{"OKRowsPastTheEndNotCompared", &logcheck.Log{Events: logged[:2], End: map[int32]int64{0: 2}}, nil, 2},
		// Without an end, every row is compared.
		{"ErrUnboundedLogMissesRows", &logcheck.Log{Events: logged[:2]}, []string{
			b + ": kv_entries has version 2 live true, the log version 1 live true",
			c + ": in kv_entries (version 1) but not in the log"}, 0},
		// An end past the rows does not excuse a row the log lacks.
		{"ErrRowBelowTheEndNotInTheLog", &logcheck.Log{Events: logged[:3], End: map[int32]int64{0: 4}}, []string{
			c + ": in kv_entries (version 1) but not in the log"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := logcheck.Projection(t.Context(), pool, tc.l, nil)
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(f.FoldDiffs)
			if !slices.Equal(f.FoldDiffs, tc.diffs) || f.NotCompared != tc.notCompared {
				t.Fatalf("diffs %q, %d not compared; want %q, %d", f.FoldDiffs, f.NotCompared, tc.diffs, tc.notCompared)
			}
		})
	}
}
