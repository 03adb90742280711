package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
)

// TestSetElements: each sadd and srem of a set is one audit row naming
// its element change, the member hashed like a value (never in the
// trail); verify is clean, and a row whose element is altered is caught.
func TestSetElements(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	s, ch := mustStore(t)
	ts := time.Now().UTC().Truncate(time.Hour).Add(time.Minute)
	const scope, member = "tenant/x/project/p", "secret-member@example.com"
	set := scope + "/processed"
	ev := func(v int64, op contract.Op, elem string, size int64) contract.Event {
		before := json.RawMessage("null")
		if v > 1 {
			before = json.RawMessage(fmt.Sprintf(`{"type":"set","size":%d,"since":1}`, size-1))
		}
		return contract.Event{
			SchemaVersion: 1, Key: set, Scope: scope, Version: v, PrevVersion: v - 1, Kind: contract.KindPut, Op: op,
			Before: before, After: json.RawMessage(fmt.Sprintf(`{"type":"set","size":%d,"since":1}`, size)),
			Semantics: contract.Semantics{Purpose: "set"}, Principal: "tester", TS: ts, CreatedAt: ts,
			Element: &contract.Element{Op: elem, Member: member},
		}
	}
	h := history{events: []contract.Event{ev(1, contract.OpSAdd, contract.ElementAdd, 1), ev(2, contract.OpSRem, contract.ElementRemove, 0)}}
	produce(t, b, h, false)
	a := runAuditor(t, b, s, audit.Config{Group: audit.Group}, nil, nil)
	waitCaughtUp(t, b, a)

	rows, err := ch.Conn.Query(context.Background(), `SELECT version, element_op, element_hash FROM audit_events FINAL WHERE key = ? ORDER BY version`, set)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	hashes := map[string]bool{}
	for rows.Next() {
		var v int64
		var op, hash string
		if err := rows.Scan(&v, &op, &hash); err != nil {
			t.Fatal(err)
		}
		if hash == "" || strings.Contains(hash, "secret") {
			t.Fatalf("element_hash %q: want the member hashed", hash)
		}
		hashes[hash] = true
		got = append(got, fmt.Sprintf("%d:%s", v, op))
	}
	rows.Close()
	if fmt.Sprint(got) != "[1:add 2:remove]" || len(hashes) != 1 {
		t.Fatalf("rows %v, %d distinct member hashes: want add then remove of one member", got, len(hashes))
	}
	if n := count(t, ch, "SELECT count() FROM audit_events WHERE positionCaseInsensitive(toString(tuple(*)), 'secret-member') > 0"); n != 0 {
		t.Fatalf("%d rows hold the raw member", n)
	}

	tr := &trail{b: b, s: s, ch: ch}
	if rep := tr.verify(t, audit.Scope{}); len(rep.Discrepancies) > 0 || rep.Rows != 2 {
		t.Fatalf("verify: %+v", rep)
	}
	t.Run("ErrElementAltered", func(t *testing.T) {
		mutate(t, ch, "ALTER TABLE audit_events UPDATE element_op = 'add' WHERE key = ? AND version = 2", set)
		wantFirst(t, tr.verify(t, audit.Scope{}), set, 2, audit.ProblemRowAltered)
	})
}
