package stash_test

import (
	"testing"

	"github.com/google/uuid"

	"github.com/eskv/eskv/stash"
)

// TestR7_HistoryRecordsEveryChange: one entry per persisted change,
// oldest first, with the PRD's five operations, UUID v7 history ids, the
// value after the change and the crumb that made it.
func TestR7_HistoryRecordsEveryChange(t *testing.T) {
	t.Parallel()
	tb := mustTable(t)
	crumb := tb.ChangedBy("crumb-42")
	counter := mustCreate(t, tb, "n", stash.TypeCounter, nil)
	counter.Increment(5)
	if err := crumb.Set(counter.StashID, counter); err != nil {
		t.Fatal(err)
	}
	counter.SetValue(map[string]any{"value": 1})
	if err := tb.Set(counter.StashID, counter); err != nil {
		t.Fatal(err)
	}
	lock := mustCreate(t, crumb, "l", stash.TypeLock, nil)
	for _, step := range []func() error{func() error { return lock.Acquire("w") }, func() error { return lock.Release("w") }} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		if err := tb.Set(lock.StashID, lock); err != nil {
			t.Fatal(err)
		}
	}
	wantHistory(t, tb, counter.StashID, []string{"create", "increment", "set"}, []string{`{"value":0}`, `{"value":5}`, `{"value":1}`}, []string{"", "crumb-42", ""})
	wantHistory(t, tb, lock.StashID, []string{"create", "acquire", "release"}, []string{`null`, ``, `null`}, []string{"crumb-42", "", ""})
	_, err := tb.History("")
	wantErr(t, "empty id", err, stash.ErrInvalidID)
	_, err = tb.History("0190b8a2-7c1e-7000-8000-000000000000")
	wantErr(t, "unknown id", err, stash.ErrNotFound)
}

// wantHistory checks the history of stash id: its ops, values ("" skips
// the check) and ChangedBy ("" for nil), versions 1.. in order.
func wantHistory(t *testing.T, tb *stash.Table, id string, ops, values, by []string) {
	t.Helper()
	h, err := tb.History(id)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != len(ops) {
		t.Fatalf("history of %s: %d entries, want %d: %+v", id, len(h), len(ops), h)
	}
	seen := map[string]bool{}
	for i, e := range h {
		u, err := uuid.Parse(e.HistoryID)
		if err != nil || u.Version() != 7 || seen[e.HistoryID] {
			t.Fatalf("entry %d: history id %q is not a fresh UUID v7", i, e.HistoryID)
		}
		seen[e.HistoryID] = true
		changedBy := ""
		if e.ChangedBy != nil {
			changedBy = *e.ChangedBy
		}
		if e.Version != int64(i+1) || e.Operation != ops[i] || (values[i] != "" && jsonOf(t, e.Value) != values[i]) ||
			changedBy != by[i] || e.CreatedAt.IsZero() || (i > 0 && e.CreatedAt.Before(h[i-1].CreatedAt)) {
			t.Fatalf("entry %d: %+v (changedBy %q); want version %d, op %s, value %s, by %q", i, e, changedBy, i+1, ops[i], values[i], by[i])
		}
	}
}
