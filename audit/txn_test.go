package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/testenv"
)

// txnHistory is two applied transactions (t-1 creates three keys, t-2
// updates two of them), a single write, a rejected transaction (t-3,
// failing at its operation 1 of 4) and a rejected single write.
func txnHistory(ts time.Time) history {
	const scope = "tenant/x/project/p"
	put := func(key string, v int64, txn string, size int) contract.Event {
		return contract.Event{
			SchemaVersion: 1, Key: scope + "/" + key, Scope: scope, Version: v, PrevVersion: v - 1,
			Kind: contract.KindPut, Op: contract.OpSet, Before: json.RawMessage(fmt.Sprint(v - 1)), After: json.RawMessage(fmt.Sprint(v)),
			Semantics: contract.Semantics{Purpose: "counter"}, Principal: "tester", RequestID: "r-" + txn, TS: ts, CreatedAt: ts,
			TxnID: txn, TxnSize: size,
		}
	}
	rejected := func(id, txn string, op *int, size int) decide.Conflict {
		return decide.Conflict{
			SchemaVersion: 1, ID: id, Key: scope + "/b", Scope: scope, Op: contract.OpCAS,
			ExpectedVersion: 1, CurrentVersion: 2, Attempted: json.RawMessage(`7`), Current: json.RawMessage(`2`),
			Semantics: contract.Semantics{Purpose: "counter"}, Principal: "tester", TS: ts, Reason: "version_mismatch",
			TxnID: txn, TxnOp: op, TxnSize: size,
		}
	}
	one := 1
	return history{
		events: []contract.Event{
			put("a", 1, "t-1", 3), put("b", 1, "t-1", 3), put("c", 1, "t-1", 3),
			put("single", 1, "", 0),
			put("a", 2, "t-2", 2), put("b", 2, "t-2", 2),
		},
		conflicts: []decide.Conflict{rejected("c-txn", "t-3", &one, 4), rejected("c-single", "", nil, 0)},
	}
}

// TestTransactions: each changed key of a transaction is one row carrying
// its txn_id and txn_size; the rejected transaction is one conflict row
// naming its failing operation; the conflict rate counts a transaction
// once, applied or rejected; verify is clean, and a row moved out of its
// transaction, or a conflict row naming another operation, is caught.
func TestTransactions(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	s, ch := mustStore(t)
	ts := time.Now().UTC().Truncate(time.Hour).Add(time.Minute)
	h := txnHistory(ts)
	produce(t, b, h, false)
	a := runAuditor(t, b, s, audit.Config{Group: audit.Group}, nil, nil)
	waitCaughtUp(t, b, a)
	ctx := context.Background()

	t.Run("RowsOfATransaction", func(t *testing.T) {
		rows, err := ch.Conn.Query(ctx, `SELECT key, version, txn_size FROM audit_events FINAL WHERE txn_id = 't-1' ORDER BY key`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var got []string
		for rows.Next() {
			var key string
			var v int64
			var size int32
			if err := rows.Scan(&key, &v, &size); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s@%d/%d", key, v, size))
		}
		if want := "[tenant/x/project/p/a@1/3 tenant/x/project/p/b@1/3 tenant/x/project/p/c@1/3]"; fmt.Sprint(got) != want {
			t.Errorf("rows of t-1: %v, want %s", got, want)
		}
		if n := count(t, ch, "SELECT count() FROM audit_events FINAL WHERE key = 'tenant/x/project/p/single' AND txn_id = '' AND txn_size = 0"); n != 1 {
			t.Errorf("single write: %d rows without a transaction, want 1", n)
		}
		var txns, whole uint64
		if err := ch.Conn.QueryRow(ctx, "SELECT count(), countIf(events = txn_size) FROM transactions").Scan(&txns, &whole); err != nil {
			t.Fatal(err)
		}
		if txns != 2 || whole != 2 {
			t.Errorf("transactions view: %d transactions, %d whole; want 2, 2", txns, whole)
		}
	})
	t.Run("RejectedTransactionIsOneConflictRow", func(t *testing.T) {
		var txn, key string
		var op, size int32
		if err := ch.Conn.QueryRow(ctx, "SELECT txn_id, txn_op, txn_size, key FROM rejected_transactions").Scan(&txn, &op, &size, &key); err != nil {
			t.Fatal(err)
		}
		if txn != "t-3" || op != 1 || size != 4 || key != "tenant/x/project/p/b" {
			t.Errorf("rejected transaction: %s op %d of %d on %s; want t-3 op 1 of 4 on tenant/x/project/p/b", txn, op, size, key)
		}
		if n := count(t, ch, "SELECT count() FROM audit_conflicts FINAL WHERE conflict_id = 'c-single' AND txn_id = '' AND txn_op = -1"); n != 1 {
			t.Errorf("single rejected write: %d rows without a transaction, want 1", n)
		}
	})
	t.Run("ConflictRateCountsATransactionOnce", func(t *testing.T) {
		// Applied: t-1, the single write and t-2; conflicts: t-3 and
		// the single rejected write.
		const applied, conflicts = 3, 2
		if n := count(t, ch, "SELECT sum(applied) FROM conflict_rate_minute"); n != applied {
			t.Errorf("conflict_rate_minute applied %d, want %d", n, applied)
		}
		if n := count(t, ch, "SELECT sum(conflicts) FROM conflict_rate_hour"); n != conflicts {
			t.Errorf("conflict_rate_hour conflicts %d, want %d", n, conflicts)
		}
		rates, err := s.ConflictRates(ctx, audit.RateQuery{From: ts.Add(-time.Hour), To: ts.Add(time.Hour), Bucket: audit.Total})
		if err != nil {
			t.Fatal(err)
		}
		if len(rates) != 1 || rates[0].Applied != applied || rates[0].Conflicts != conflicts {
			t.Errorf("ConflictRates = %+v, want applied %d conflicts %d", rates, applied, conflicts)
		}
	})

	tr := &trail{b: b, s: s, ch: ch}
	if rep := tr.verify(t, audit.Scope{}); len(rep.Discrepancies) > 0 || rep.Rows != 6 || rep.Conflicts != 2 {
		t.Fatalf("verify: %+v", rep)
	}
	t.Run("ErrRowMovedOutOfItsTransaction", func(t *testing.T) {
		mutate(t, ch, "ALTER TABLE audit_events UPDATE txn_id = '', txn_size = 0 WHERE key = 'tenant/x/project/p/c'")
		wantFirst(t, tr.verify(t, audit.Scope{}), "tenant/x/project/p/c", 1, audit.ProblemRowAltered)
	})
	t.Run("ErrConflictNamesAnotherOperation", func(t *testing.T) {
		mutate(t, ch, "ALTER TABLE audit_conflicts UPDATE txn_op = 0 WHERE conflict_id = 'c-txn'")
		rep := tr.verify(t, audit.KeyScope("tenant/x/project/p/b"))
		if len(rep.Discrepancies) != 1 || rep.Discrepancies[0].Problem != audit.ProblemConflictWrong {
			t.Fatalf("verify: %v, want one %s", rep.Discrepancies, audit.ProblemConflictWrong)
		}
		t.Logf("verify names it: %s", rep.Discrepancies[0])
	})
}
