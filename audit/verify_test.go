package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// trail is a caught-up audit trail of a synthetic history.
type trail struct {
	b  *testenv.Broker
	s  *audit.Store
	ch *testenv.ClickHouse
	h  history
	a  *auditor
}

func mustTrail(t *testing.T) *trail {
	t.Helper()
	tr := &trail{b: testenv.MustBroker(t, 4)}
	tr.s, tr.ch = mustStore(t)
	ts := time.Now().UTC().Truncate(time.Microsecond)
	tr.h = synth("a", 10, 4, ts)
	b := synth("b", 5, 4, ts)
	tr.h.events = append(tr.h.events, b.events...)
	tr.h.conflicts = append(tr.h.conflicts, b.conflicts...)
	produce(t, tr.b, tr.h, true)
	tr.a = runAuditor(t, tr.b, tr.s, audit.Config{Group: audit.Group}, nil, nil)
	waitCaughtUp(t, tr.b, tr.a)
	return tr
}

func (tr *trail) verify(t *testing.T, scope audit.Scope) *audit.VerifyReport {
	t.Helper()
	kr, err := audit.NewKeyring(testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), tr.s, kr, audit.VerifyConfig{Brokers: tr.b.Addrs, Topics: tr.b.Topics, Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// mutate runs an ALTER TABLE ... UPDATE or DELETE on ch and waits for it.
func mutate(t *testing.T, ch *testenv.ClickHouse, q string, args ...any) {
	t.Helper()
	if err := ch.Conn.Exec(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	testenv.WaitFor(t, 30*time.Second, "mutation "+q, func() bool {
		return count(t, ch, "SELECT count() FROM system.mutations WHERE database = currentDatabase() AND is_done = 0") == 0
	})
}

func wantFirst(t *testing.T, rep *audit.VerifyReport, key string, version int64, problem string) {
	t.Helper()
	if len(rep.Discrepancies) == 0 {
		t.Fatalf("verify passed; want %s@%d %s", key, version, problem)
	}
	d := rep.Discrepancies[0]
	if d.Key != key || d.Version != version || d.Problem != problem {
		t.Fatalf("first discrepancy %s; want %s@%d %s (all: %v)", d, key, version, problem, rep.Discrepancies)
	}
	t.Logf("verify names it: %s", d)
}

func TestVerify(t *testing.T) {
	const k1 = "tenant/a/project/p1/k1"
	t.Run("OK", func(t *testing.T) {
		tr := mustTrail(t)
		rep := tr.verify(t, audit.Scope{})
		if len(rep.Discrepancies) > 0 || rep.Rows != 60 || rep.Events != 60 || rep.Conflicts != 15 || rep.Pending != 0 {
			t.Fatalf("report %+v", rep)
		}
	})
	for _, tc := range []struct {
		name, mutation string
		version        int64
		problem        string
	}{
		{"ErrDeletedRow", "ALTER TABLE audit_events DELETE WHERE key = ? AND version = 2", 2, audit.ProblemRowMissing},
		{"ErrDeletedLastRow", "ALTER TABLE audit_events DELETE WHERE key = ? AND version = 4", 4, audit.ProblemRowMissing},
		{"ErrAlteredPrincipal", "ALTER TABLE audit_events UPDATE principal = 'mallory' WHERE key = ? AND version = 3", 3, audit.ProblemRowAltered},
		{"ErrAlteredDirective", "ALTER TABLE audit_events UPDATE directive = 'forged' WHERE key = ? AND version = 3", 3, audit.ProblemRowAltered},
		{"ErrAlteredHash", "ALTER TABLE audit_events UPDATE after_hash = before_hash WHERE key = ? AND version = 1", 1, audit.ProblemRowAltered},
		{"ErrAlteredTimestamp", "ALTER TABLE audit_events UPDATE ts_us = ts_us - 1000000 WHERE key = ? AND version = 2", 2, audit.ProblemRowAltered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := mustTrail(t)
			mutate(t, tr.ch, tc.mutation, k1)
			wantFirst(t, tr.verify(t, audit.Scope{}), k1, tc.version, tc.problem)
		})
	}
	t.Run("ErrFabricatedRow", func(t *testing.T) {
		// A row that chains correctly (made with the key) but whose event
		// never was in the log.
		tr := mustTrail(t)
		last := tr.h.events[3] // k0... find k1's last event
		for _, e := range tr.h.events {
			if e.Key == k1 && e.Version == 4 {
				last = e
			}
		}
		var prev string
		if err := tr.ch.Conn.QueryRow(context.Background(), "SELECT any(chain_hash) FROM audit_events WHERE key = ? AND version = 4", k1).Scan(&prev); err != nil {
			t.Fatal(err)
		}
		fake := last
		fake.Version, fake.PrevVersion, fake.Before = 5, 4, last.After
		row := audit.EventRow(&fake, audit.At{Partition: 0, Offset: 9999}, testKey(t), audit.CurrentScheme, prev)
		if err := tr.s.InsertEvents(context.Background(), []audit.Row{row}, time.Now()); err != nil {
			t.Fatal(err)
		}
		wantFirst(t, tr.verify(t, audit.Scope{}), k1, 5, audit.ProblemEventMissing)
	})
	t.Run("ErrDeletedConflictRow", func(t *testing.T) {
		tr := mustTrail(t)
		mutate(t, tr.ch, "ALTER TABLE audit_conflicts DELETE WHERE conflict_id = 'c-1' AND key = ?", k1)
		rep := tr.verify(t, audit.Scope{})
		if len(rep.Discrepancies) != 1 || rep.Discrepancies[0].Problem != audit.ProblemConflictAbsent || rep.Discrepancies[0].ConflictID != "c-1" {
			t.Fatalf("discrepancies %v", rep.Discrepancies)
		}
	})
	t.Run("OKOtherTenantTampered", func(t *testing.T) {
		tr := mustTrail(t)
		mutate(t, tr.ch, "ALTER TABLE audit_events DELETE WHERE key = ? AND version = 2", "tenant/b/project/p1/k1")
		if rep := tr.verify(t, audit.TenantScope("a")); len(rep.Discrepancies) > 0 || rep.Rows != 40 {
			t.Fatalf("tenant a: %+v", rep)
		}
		wantFirst(t, tr.verify(t, audit.TenantScope("b")), "tenant/b/project/p1/k1", 2, audit.ProblemRowMissing)
	})
}

// TestVerifyCompactedSet: a set's element changes are keyed by set and
// member (contract.Event.RecordKey), so compaction removes only a member's
// superseded change; verify of the set's one key (audit.KeyScope, as
// `auditor verify -key`) reads its element records (scoped by their
// event key) and counts that row compacted, nothing missing.
func TestVerifyCompactedSet(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	s, _ := mustStore(t)
	ts := time.Now().UTC().Truncate(time.Microsecond)
	const set = "tenant/s/project/p/set"
	var h history
	size := 0
	for v, ch := range []contract.Element{{Op: contract.ElementAdd, Member: "a"}, {Op: contract.ElementAdd, Member: "b"},
		{Op: contract.ElementRemove, Member: "a"}, {Op: contract.ElementAdd, Member: "c"}} {
		before := fmt.Sprintf(`{"type":"set","size":%d,"since":1}`, size)
		if v == 0 {
			before = "null"
		}
		op := contract.OpSAdd
		if size++; ch.Op == contract.ElementRemove {
			op, size = contract.OpSRem, size-2
		}
		h.events = append(h.events, contract.Event{
			SchemaVersion: 1, Key: set, Scope: "tenant/s/project/p", Version: int64(v + 1), PrevVersion: int64(v),
			Kind: contract.KindPut, Op: op, Before: json.RawMessage(before), After: json.RawMessage(fmt.Sprintf(`{"type":"set","size":%d,"since":1}`, size)),
			Semantics: contract.Semantics{Purpose: "set"}, Principal: "tester", TS: ts, CreatedAt: ts, Element: &ch,
		})
	}
	for _, e := range h.events { // one transaction each, so compaction has batches to drop
		produce(t, b, history{events: []contract.Event{e}}, false)
	}
	produce(t, b, history{events: synth("filler", 1, 1, ts).events}, false) // compaction keeps the last batch whole
	a := runAuditor(t, b, s, audit.Config{Group: audit.Group}, nil, nil)
	waitCaughtUp(t, b, a)
	b.Cluster.Compact()

	kr, _ := audit.NewKeyring(testKey(t))
	rep, err := audit.Verify(context.Background(), s, kr, audit.VerifyConfig{Brokers: b.Addrs, Topics: b.Topics, Group: audit.Group, Scope: audit.KeyScope(set)})
	if err != nil {
		t.Fatal(err)
	}
	// 4 rows; a's add (version 1) compacted under its remove; b, a's
	// remove and c in the topic.
	if len(rep.Discrepancies) > 0 || rep.Rows != 4 || rep.Events != 3 || rep.Compacted != 1 {
		t.Fatalf("report %+v; want 4 rows, 3 events, 1 compacted, no discrepancy", rep)
	}
}

// TestVerifyCompaction: rows whose events compaction removed still verify
// (a later version is in the topic and the chain links through them), and
// keys whose first versions were compacted before the auditor read them
// start their chain at the first version it saw.
func TestVerifyCompaction(t *testing.T) {
	b := testenv.MustBroker(t, 1)
	s, ch := mustStore(t)
	ts := time.Now().UTC().Truncate(time.Microsecond)
	audited := synth("early", 2, 3, ts)
	late := synth("late", 2, 3, ts)
	// One transaction per version, so compaction has batches to drop.
	one := func(h history, v int64) history {
		var out history
		for _, e := range h.events {
			if e.Version == v {
				out.events = append(out.events, e)
			}
		}
		return out
	}
	for v := int64(1); v <= 3; v++ {
		produce(t, b, one(audited, v), false)
	}
	a := runAuditor(t, b, s, audit.Config{Group: audit.Group}, nil, nil)
	waitCaughtUp(t, b, a)
	if err := a.Stop(t); err != nil {
		t.Errorf("auditor: %v", err)
	}
	for v := int64(1); v <= 3; v++ {
		produce(t, b, one(late, v), false)
	}
	produce(t, b, history{events: synth("filler", 1, 1, ts).events}, false) // compaction keeps the last batch whole
	b.Cluster.Compact()
	a2 := runAuditor(t, b, s, audit.Config{Group: "kv-auditor-late"}, nil, nil)
	waitCaughtUp(t, b, a2)

	kr, _ := audit.NewKeyring(testKey(t))
	rep, err := audit.Verify(context.Background(), s, kr, audit.VerifyConfig{Brokers: b.Addrs, Topics: b.Topics, Group: "kv-auditor-late"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Discrepancies) > 0 {
		t.Fatalf("discrepancies: %v", rep.Discrepancies)
	}
	// early: 6 rows, 2 events left, 4 compacted; late: 2 rows (version 3), chain starts.
	if rep.Compacted != 4 || rep.ChainStarts != 2 || rep.Rows != 9 {
		t.Fatalf("report %+v", rep)
	}
	if n := count(t, ch, "SELECT count() FROM audit_events FINAL WHERE key LIKE 'tenant/late/%' AND prev_chain_hash = ''"); n != 2 {
		t.Fatalf("%d late chain starts in ClickHouse, want 2", n)
	}

	t.Run("ErrChainStartWithPreviousRow", func(t *testing.T) {
		// Deleting rows 1 and 2 of a key whose events are compacted away
		// still breaks the chain: row 3 links to row 2.
		key := audited.events[0].Key
		mutate(t, ch, "ALTER TABLE audit_events DELETE WHERE key = ? AND version < 3", key)
		rep, err := audit.Verify(context.Background(), s, kr, audit.VerifyConfig{Brokers: b.Addrs, Topics: b.Topics, Group: "kv-auditor-late"})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Discrepancies) == 0 || rep.Discrepancies[0].Key != key || rep.Discrepancies[0].Version != 2 {
			t.Fatalf("discrepancies %v; want %s@2 first", rep.Discrepancies, key)
		}
		t.Logf("verify names it: %s", rep.Discrepancies[0])
	})
}

// TestVerifyMixedSchemes: a trail whose keys have scheme-1 rows (written
// before hash schemes) followed by scheme-2 rows verifies, each row under
// its own scheme, with the chain linking across the change; a row whose
// hash_scheme is altered does not.
func TestVerifyMixedSchemes(t *testing.T) {
	b := testenv.MustBroker(t, 4)
	s, ch := mustStore(t)
	ts := time.Now().UTC().Truncate(time.Microsecond)
	all := synth("m", 6, 4, ts)
	var early, late history
	for _, e := range all.events {
		if e.Version <= 2 {
			early.events = append(early.events, e)
		} else {
			late.events = append(late.events, e)
		}
	}
	early.conflicts = all.conflicts
	for _, c := range all.conflicts {
		c.ID += "-late"
		late.conflicts = append(late.conflicts, c)
	}
	produce(t, b, early, false)
	a1 := runAuditor(t, b, s, audit.Config{Group: audit.Group, HashScheme: audit.Scheme1}, nil, nil)
	waitCaughtUp(t, b, a1)
	if err := a1.Stop(t); err != nil {
		t.Fatalf("scheme-1 auditor: %v", err)
	}
	produce(t, b, late, false)
	a2 := runAuditor(t, b, s, audit.Config{Group: audit.Group}, nil, nil)
	waitCaughtUp(t, b, a2)

	for q, want := range map[string]uint64{
		"SELECT count() FROM audit_events FINAL WHERE hash_scheme = 1 AND version <= 2":                     12,
		"SELECT count() FROM audit_events FINAL WHERE hash_scheme = 2 AND version > 2":                      12,
		"SELECT count() FROM audit_conflicts FINAL WHERE hash_scheme = 1 AND conflict_id NOT LIKE '%-late'": 6,
		"SELECT count() FROM audit_conflicts FINAL WHERE hash_scheme = 2 AND conflict_id LIKE '%-late'":     6,
	} {
		if n := count(t, ch, q); n != want {
			t.Fatalf("%s: %d, want %d", q, n, want)
		}
	}
	tr := &trail{b: b, s: s, ch: ch}
	if rep := tr.verify(t, audit.Scope{}); len(rep.Discrepancies) > 0 || rep.Rows != 24 || rep.Conflicts != 12 {
		t.Fatalf("mixed trail: %+v", rep)
	}
	const k0 = "tenant/m/project/p0/k0"
	t.Run("ErrUnknownScheme", func(t *testing.T) {
		mutate(t, ch, "ALTER TABLE audit_events UPDATE hash_scheme = 7 WHERE key = ? AND version = 1", k0)
		wantFirst(t, tr.verify(t, audit.Scope{}), k0, 1, audit.ProblemUnknownScheme)
		mutate(t, ch, "ALTER TABLE audit_events UPDATE hash_scheme = 1 WHERE key = ? AND version = 1", k0)
	})
	t.Run("ErrDowngradedRow", func(t *testing.T) {
		// A scheme-2 row passed off as scheme 1 (whose hashes collide)
		// no longer recomputes to its chain hash.
		mutate(t, ch, "ALTER TABLE audit_events UPDATE hash_scheme = 1 WHERE key = ? AND version = 3", k0)
		wantFirst(t, tr.verify(t, audit.Scope{}), k0, 3, audit.ProblemRowAltered)
	})
}
