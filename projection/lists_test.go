package projection_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/elemkey"
	"github.com/eskv/eskv/testenv"
)

// listModel folds list ops the way the writer decides them and emits
// their events, so the projection can be checked against the fold.
type listModel struct {
	tb      testing.TB
	key     string
	version int64
	head    int64
	since   int64
	values  []string
}

func (m *listModel) event(op contract.Op, el *contract.Element) contract.Event {
	m.version++
	if m.since == 0 {
		m.since = m.version
	}
	meta, _ := json.Marshal(contract.CollectionMeta{Type: "list", Size: int64(len(m.values)), Since: m.since, Head: m.head})
	e := put(m.tb, m.key, m.version, string(meta))
	e.Op, e.Semantics, e.Element = op, contract.Semantics{Purpose: "list"}, el
	return e
}

func (m *listModel) lpush(v string) contract.Event {
	m.head--
	m.values = append([]string{v}, m.values...)
	return m.event(contract.OpLPush, &contract.Element{Op: contract.ElementAdd, Member: elemkey.ListPosition(m.head), Value: json.RawMessage(v)})
}

func (m *listModel) rpush(v string) contract.Event {
	m.values = append(m.values, v)
	return m.event(contract.OpRPush, &contract.Element{Op: contract.ElementAdd, Member: elemkey.ListPosition(m.head + int64(len(m.values)) - 1), Value: json.RawMessage(v)})
}

func (m *listModel) lpop() contract.Event {
	pos, v := m.head, m.values[0]
	m.head++
	m.values = m.values[1:]
	return m.event(contract.OpLPop, &contract.Element{Op: contract.ElementRemove, Member: elemkey.ListPosition(pos), Value: json.RawMessage(v)})
}

func (m *listModel) rpop() contract.Event {
	n := len(m.values) - 1
	pos, v := m.head+int64(n), m.values[n]
	m.values = m.values[:n]
	return m.event(contract.OpRPop, &contract.Element{Op: contract.ElementRemove, Member: elemkey.ListPosition(pos), Value: json.RawMessage(v)})
}

func (m *listModel) ltrim(start, stop int64) contract.Event {
	from, to, ok := elemkey.ListRange(start, stop, int64(len(m.values)))
	if !ok {
		m.head += int64(len(m.values))
		m.values = nil
	} else {
		m.head += from
		m.values = m.values[from : to+1]
	}
	return m.event(contract.OpLTrim, nil)
}

func mustRange(tb testing.TB, s *projection.Store, key string, start, stop int64) []string {
	tb.Helper()
	vs, _, err := s.Range(context.Background(), key, start, stop, projection.Page{Limit: 1000, MaxBytes: 1 << 20, Now: t0})
	if err != nil {
		tb.Fatal(err)
	}
	out := []string{}
	for _, v := range vs {
		out = append(out, string(v))
	}
	return out
}

// TestApplyLists: pushes at both ends, pops and trims, applied in batches
// of any cut and replayed, leave the projection holding the fold of the
// events: every range (Redis indexes, negative from the end) equals the
// model's; trimmed and popped rows are never read back; a deleted list's
// rows are not the next list's elements.
func TestApplyLists(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)

	m := &listModel{tb: t, key: "tenant/t/project/p/activity-log"}
	var evs []contract.Event
	for i := range 20 {
		if i%3 == 0 {
			evs = append(evs, m.rpush(fmt.Sprintf(`"r%d"`, i)))
		} else {
			evs = append(evs, m.lpush(fmt.Sprintf(`{"n":%d}`, i)))
		}
	}
	evs = append(evs, m.lpop(), m.rpop(), m.ltrim(1, -2), m.lpush(`"again"`), m.rpush(`"end"`), m.ltrim(0, 9), m.lpop(), m.lpush(`"reused"`))
	// Batches of 3, each applied twice (a replay changes nothing).
	for i := 0; i < len(evs); i += 3 {
		b := batchOf(int64(i), evs[i:min(i+3, len(evs))]...)
		mustApply(t, s, "kv.lists", b)
		mustApply(t, s, "kv.lists", b)
	}
	for _, r := range [][2]int64{{0, -1}, {0, 99}, {0, 0}, {-1, -1}, {2, 5}, {-3, -1}, {5, 2}, {-100, 100}, {10, 20}} {
		from, to, ok := elemkey.ListRange(r[0], r[1], int64(len(m.values)))
		want := []string{}
		if ok {
			want = m.values[from : to+1]
		}
		if got := mustRange(t, s, m.key, r[0], r[1]); !slices.Equal(got, want) {
			t.Fatalf("lrange %d %d = %v, want %v", r[0], r[1], got, want)
		}
	}
	if len(m.values) != 10 {
		t.Fatalf("model holds %d values, want 10", len(m.values))
	}

	t.Run("OKTruncated", func(t *testing.T) {
		vs, truncated, err := s.Range(context.Background(), m.key, 0, -1, projection.Page{Limit: 4, MaxBytes: 1 << 20, Now: t0})
		if err != nil || len(vs) != 4 || !truncated || string(vs[0]) != m.values[0] {
			t.Fatalf("range %s truncated %v err %v", vs, truncated, err)
		}
	})

	t.Run("OKDeletedListRowsAreNotElements", func(t *testing.T) {
		del := event(t, contract.KindDelete, m.key, m.version+1, "")
		mustApply(t, s, "kv.lists", batchOf(100, del))
		if got := mustRange(t, s, m.key, 0, -1); len(got) != 0 {
			t.Fatalf("deleted list holds %v", got)
		}
		n := &listModel{tb: t, key: m.key, version: m.version + 1}
		mustApply(t, s, "kv.lists", batchOf(101, n.rpush(`"fresh"`)))
		if got := mustRange(t, s, m.key, 0, -1); !slices.Equal(got, []string{`"fresh"`}) {
			t.Fatalf("re-created list holds %v", got)
		}
	})

	t.Run("OKMissingListIsEmpty", func(t *testing.T) {
		if got := mustRange(t, s, "tenant/t/project/p/none", 0, -1); len(got) != 0 {
			t.Fatalf("missing list holds %v", got)
		}
	})

	t.Run("OKLookupReadsTheValue", func(t *testing.T) {
		k := "tenant/t/project/p/lookup"
		l := &listModel{tb: t, key: k}
		mustApply(t, s, "kv.lists", batchOf(200, l.rpush(`"a"`), l.rpush(`"b"`)))
		ref := projection.ElementRef{Collection: k, Member: elemkey.ListPosition(1)}
		f, err := s.Lookup(context.Background(), nil, nil, []projection.ElementRef{ref})
		if err != nil || f.Elements[ref] != 2 || string(f.Values[ref]) != `"b"` {
			t.Fatalf("lookup %+v %v", f, err)
		}
		v, val, err := s.ListElement(context.Background(), ref)
		if err != nil || v != 2 || string(val) != `"b"` {
			t.Fatalf("ListElement = %d %s %v", v, val, err)
		}
	})
}

// TestCompareLists: projector diff compares each live list's elements in
// its range: a rebuild that lost a push differs, rows outside the range
// (trimmed or popped, left behind) do not.
func TestCompareLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const k = "tenant/t/project/p/list"
	m := &listModel{tb: t, key: k}
	log := batchOf(0, m.rpush(`"a"`), m.rpush(`"b"`), m.rpush(`"c"`), m.ltrim(1, -1), m.rpush(`"d"`))
	for _, tc := range []struct {
		name    string
		rebuilt []projection.Applied
		extra   string // run on the live projection
		differs bool
	}{
		{"OKSameLog", log, "", false},
		{"OKTrimmedRowsIgnored", log, `UPDATE kv_elements SET value = '"changed"' WHERE member = '` + elemkey.ListPosition(0) + `'`, false},
		{"ErrValueDiffers", log, `UPDATE kv_elements SET value = '"changed"' WHERE member = '` + elemkey.ListPosition(1) + `'`, true},
		{"ErrCompactedLosesElements", log[3:], "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := testenv.MustPostgresDB(t)
			mustApply(t, projection.New(pg.Pool), "kv.lists", log)
			mustApply(t, projection.New(pg.MustSchema(t, "rebuilt")), "kv.lists", tc.rebuilt)
			if tc.extra != "" {
				if _, err := pg.Pool.Exec(ctx, tc.extra); err != nil {
					t.Fatal(err)
				}
			}
			d, err := projection.Compare(ctx, pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: "kv.lists", Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if d.Equal() == tc.differs || (tc.differs && (len(d.Keys) != 1 || d.Keys[0].Key != k || !slices.Contains(d.Keys[0].Columns, "elements"))) {
				t.Fatalf("diff %+v, keys %+v; want differs %v", d, d.Keys, tc.differs)
			}
		})
	}
}

// TestRequestsRememberOlderPops: the requestId lookup answers a pop's
// element and the metadata after it (AppliedRequest.Popped and After)
// when the pop is no longer the list's latest write, so that the writer
// replays a retried pop whatever was written since; other events carry
// neither.
func TestRequestsRememberOlderPops(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	m := &listModel{tb: t, key: "tenant/t/project/p/jobs"}
	push1, push2 := m.rpush(`"a"`), m.rpush(`{"job":"b"}`)
	pop := m.lpop()
	later := m.rpush(`"c"`) // another client writes the list after the pop
	push1.RequestID, pop.RequestID, later.RequestID = "push-1", "pop-1", "push-3"
	pop.RequestDigest = "pop-digest"
	mustApply(t, s, "kv.changes", batchOf(0, push1, push2, pop, later))

	ref := func(id string) projection.RequestRef { return projection.RequestRef{Key: m.key, RequestID: id} }
	_, got, err := s.StatesAndRequests(context.Background(), []string{m.key}, []projection.RequestRef{ref("pop-1"), ref("push-1")})
	if err != nil {
		t.Fatal(err)
	}
	a := got[ref("pop-1")]
	if a.Version != 3 || a.Digest != "pop-digest" || a.Popped == nil || string(a.Popped.Value) != `"a"` ||
		a.Popped.Member != pop.Element.Member || a.Popped.Op != contract.ElementRemove {
		t.Fatalf("older pop: %+v (popped %+v), want version 3 and the value it popped", a, a.Popped)
	}
	var meta contract.CollectionMeta
	if err := json.Unmarshal(a.After, &meta); err != nil || meta.Size != 1 || meta.Head != 1 || meta.Since != 1 {
		t.Fatalf("older pop's metadata %s (%v), want the list after the pop %s", a.After, err, pop.After)
	}
	if p := got[ref("push-1")]; p.Version != 1 || p.Popped != nil || p.After != nil {
		t.Fatalf("push: %+v, want version 1 without popped element or metadata", p)
	}
}

// TestRangeByteBudget: a range of large values is cut to the byte budget
// (but holds at least one value), reports truncated, and continuing from
// start+len(values) reads the rest exactly.
func TestRangeByteBudget(t *testing.T) {
	t.Parallel()
	pool := testenv.MustPostgres(t)
	s := projection.New(pool)
	m := &listModel{tb: t, key: "tenant/t/project/p/big-log"}
	big := strings.Repeat("x", 60<<10)
	var evs []contract.Event
	for i := range 200 {
		evs = append(evs, m.rpush(fmt.Sprintf(`"%03d%s"`, i, big)))
	}
	for i := 0; i < len(evs); i += 20 {
		mustApply(t, s, "kv.lists", batchOf(int64(i), evs[i:i+20]...))
	}
	const budget = 4 << 20
	var got []string
	pages := 0
	for start := int64(0); ; pages++ {
		vs, truncated, err := s.Range(context.Background(), m.key, start, -1, projection.Page{Limit: contract.MaxRange, MaxBytes: budget, Now: t0})
		if err != nil {
			t.Fatal(err)
		}
		size := 0
		for _, v := range vs {
			size += len(v)
			got = append(got, string(v))
		}
		t.Logf("page from %d: %d values, %d KiB, truncated %v", start, len(vs), size>>10, truncated)
		if size > budget || len(vs) == 0 {
			t.Fatalf("page from %d: %d values of %d bytes, want 1.. within %d", start, len(vs), size, budget)
		}
		if !truncated {
			break
		}
		start += int64(len(vs))
	}
	if pages == 0 || !slices.Equal(got, m.values) {
		t.Fatalf("%d pages read %d values, want more than one page and the %d values in order", pages+1, len(got), len(m.values))
	}

	t.Run("OKOneValueOverBudget", func(t *testing.T) {
		vs, truncated, err := s.Range(context.Background(), m.key, 5, -1, projection.Page{Limit: contract.MaxRange, MaxBytes: 10, Now: t0})
		if err != nil || len(vs) != 1 || !truncated || string(vs[0]) != m.values[5] {
			t.Fatalf("range of %d values, truncated %v err %v; want the first value alone", len(vs), truncated, err)
		}
	})
}
