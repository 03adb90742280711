package decide

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// rangeStates are the states of a prefix write's table tests: under
// tenant/a/project/b/r/, a value, a held lock, a set, a counter past
// its expiry, a deleted key and a key of the prefix's sibling path
// (r2, which the string prefix r/ does not cover, but which a batch's
// states may hold).
func rangeStates(now time.Time) map[string]keystate.State {
	past, soon := now.Add(-time.Second), now.Add(time.Minute)
	live := func(k string, v int64, val, purpose string, exp *time.Time) keystate.State {
		return keystate.State{Version: v, Live: true, Entry: contract.Entry{Key: k, Version: v, Value: json.RawMessage(val),
			ExpiresAt: exp, Semantics: contract.Semantics{Purpose: purpose}}}
	}
	p := "tenant/a/project/b/r/"
	return map[string]keystate.State{
		p + "a":                   live(p+"a", 3, `{"x":1}`, "config", nil),
		p + "lock":                live(p+"lock", 5, `{"holder":"h","token":5}`, contract.PurposeLock, &soon),
		p + "set":                 live(p+"set", 2, `{"size":1}`, contract.PurposeSet, nil),
		p + "due":                 live(p+"due", 4, `7`, "counter", &past),
		p + "gone":                {Version: 9},
		"tenant/a/project/b/r2/x": live("tenant/a/project/b/r2/x", 1, `1`, "other", nil),
	}
}

// TestDecideRange: a range delete removes every live key a read sees
// under its prefix (a held lock and a set too), each at its next version
// under one transaction id, and nothing else; an expireDue removes only
// the keys past their expiry, with expire events and no transaction id;
// more than contract.MaxRangeKeys keys (or a bound: more not read) are
// refused too_many_keys unless chunked, which answers truncated with the
// cursor; keys up to the cursor are left alone.
func TestDecideRange(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := "tenant/a/project/b/r/"
	for _, tc := range []struct {
		name    string
		op      contract.Op
		chunked bool
		after   string
		bound   string
		extra   int // live keys p+"n%05d" added
		want    []string
		code    string
		trunc   bool
		next    string
	}{
		{"OKDeleteAll", contract.OpDeleteRange, false, "", "", 0, []string{p + "a", p + "lock", p + "set"}, "", false, ""},
		{"OKDeleteAfterCursor", contract.OpDeleteRange, true, p + "b", "", 0, []string{p + "lock", p + "set"}, "", false, ""},
		{"OKExpireDue", contract.OpExpireDue, true, "", "", 0, []string{p + "due"}, "", false, ""},
		{"OKExpireDueNone", contract.OpExpireDue, true, p + "due", "", 0, nil, "", false, ""},
		{"OKDeleteBound", contract.OpDeleteRange, true, "", p + "b", 0, []string{p + "a"}, "", true, p + "a"},
		{"OKDeleteBoundNoneLive", contract.OpDeleteRange, true, "", p + "0", 0, nil, "", true, p + "0"},
		{"OKDeleteAtTheBound", contract.OpDeleteRange, false, "", "", contract.MaxRangeKeys - 3, nil, "", false, ""},
		{"OKChunked", contract.OpDeleteRange, true, "", "", contract.MaxRangeKeys, nil, "", true, ""},
		{"ErrTooMany", contract.OpDeleteRange, false, "", "", contract.MaxRangeKeys - 2, nil, contract.ETooManyKeys, false, ""},
		{"ErrBound", contract.OpDeleteRange, false, "", p + "b", 0, nil, contract.ETooManyKeys, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			states := rangeStates(now)
			for i := range tc.extra {
				k := fmt.Sprintf("%sn%05d", p, i)
				states[k] = keystate.State{Version: 1, Live: true, Entry: contract.Entry{Key: k, Version: 1, Value: json.RawMessage(`1`)}}
			}
			in := Input{States: states, Under: PrefixKeys{Bound: tc.bound}}
			for k := range states {
				in.Under.Keys = append(in.Under.Keys, k)
			}
			c := &Range{Header: Header{Key: mustKey(t, "tenant/a/project/b/x"), Op: tc.op, Principal: "q"}, Prefix: p, After: tc.after, Chunked: tc.chunked}
			d := c.Decide(in, testEnv(now, 9))
			if tc.code != "" {
				if contract.ErrorCode(d.Err) != tc.code || len(d.Txn) != 0 {
					t.Fatalf("want %s, got %d events, err %v", tc.code, len(d.Txn), d.Err)
				}
				return
			}
			checkRange(t, c, d, states, tc.want, tc.extra)
			if a := d.Result.Prefix; a.Truncated != tc.trunc || (tc.next != "" && a.NextCursor != tc.next) {
				t.Fatalf("answer %+v, want truncated %v next %q", a, tc.trunc, tc.next)
			}
		})
	}
}

// checkRange checks the accepted decision d of c on states: the events
// of want (or, when want is nil and extra keys were added, of as many
// keys as the answer counts), each at its key's next version.
func checkRange(t *testing.T, c *Range, d Decision, states map[string]keystate.State, want []string, extra int) {
	t.Helper()
	a := d.Result.Prefix
	if d.Err != nil || d.Event != nil || a.Count != len(d.Txn) || a.Prefix != c.Prefix {
		t.Fatalf("decision %+v", d)
	}
	if want != nil || extra == 0 {
		if len(d.Txn) != len(want) {
			t.Fatalf("%d events, want %v", len(d.Txn), want)
		}
		for i, ev := range d.Txn {
			if ev.Key != want[i] {
				t.Fatalf("event %d of key %s, want %s", i, ev.Key, want[i])
			}
		}
	} else if a.Count != min(extra+3, contract.MaxRangeKeys) {
		t.Fatalf("%d deleted of %d", a.Count, extra+3)
	}
	for _, ev := range d.Txn {
		st := states[ev.Key]
		if ev.Version != st.Version+1 || ev.PrevVersion != st.Version || ev.Principal != "q" || string(ev.Before) != string(st.Entry.Value) {
			t.Fatalf("event %+v of state %+v", ev, st)
		}
		switch c.Op {
		case contract.OpDeleteRange:
			if ev.Op != contract.OpDelete || ev.Kind != contract.KindDelete || ev.TxnID != a.TxnID || ev.TxnSize != a.Count || a.TxnID == "" {
				t.Fatalf("delete event %+v, answer %+v", ev, a)
			}
		case contract.OpExpireDue:
			if ev.Op != contract.OpExpire || ev.Kind != contract.KindExpire || ev.TxnID != "" || ev.ExpiresAt == nil {
				t.Fatalf("expire event %+v", ev)
			}
		}
	}
}

// TestRangePlan: a prefix write plans its prefix (the keys under it after
// its cursor, contract.MaxRangeKeys of them, due ones for an expireDue)
// and no key.
func TestRangePlan(t *testing.T) {
	t.Parallel()
	for _, op := range []contract.Op{contract.OpDeleteRange, contract.OpExpireDue} {
		var p Plan
		(&Range{Header: Header{Op: op}, Prefix: "tenant/a/project/b/", After: "tenant/a/project/b/k"}).Plan(&p)
		want := PrefixRef{Prefix: "tenant/a/project/b/", After: "tenant/a/project/b/k", Limit: contract.MaxRangeKeys, Due: op == contract.OpExpireDue}
		if len(p.Keys) != 0 || len(p.Requests) != 0 || len(p.Prefixes) != 1 || p.Prefixes[0] != want {
			t.Fatalf("%s plans %+v, want %+v", op, p, want)
		}
	}
}

// TestDecideRangeBytes: a prefix write sizes itself by
// Env.MaxAppendBytes: chunked it stops before its events exceed it
// (truncated, its cursor the last key taken; always one key at least),
// atomic it refuses value_too_large and deletes nothing.
func TestDecideRangeBytes(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := "tenant/a/project/b/r/"
	states := map[string]keystate.State{}
	in := Input{States: states}
	for i := range 10 {
		k := fmt.Sprintf("%sk%d", p, i)
		states[k] = keystate.State{Version: 1, Live: true, Entry: contract.Entry{Key: k, Version: 1, Value: json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)}}
		in.Under.Keys = append(in.Under.Keys, k)
	}
	one := EventBytes(&contract.Event{Key: p + "k0", Before: states[p+"k0"].Entry.Value, Principal: "q"})
	for _, tc := range []struct {
		name    string
		chunked bool
		budget  int
		count   int
		code    string
	}{
		{"OKUnbounded", false, 0, 10, ""},
		{"OKFits", false, 10 * one, 10, ""},
		{"OKChunked", true, 3*one + one/2, 3, ""},
		{"OKChunkedOneAtLeast", true, one / 2, 1, ""},
		{"ErrAtomic", false, 3 * one, 0, contract.ETooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := testEnv(now, 1)
			env.MaxAppendBytes = tc.budget
			c := &Range{Header: Header{Key: mustKey(t, "tenant/a/project/b/x"), Op: contract.OpDeleteRange, Principal: "q"}, Prefix: p, Chunked: tc.chunked}
			d := c.Decide(in, env)
			a := d.Result.Prefix
			if contract.ErrorCode(d.Err) != tc.code || len(d.Txn) != tc.count || a.Count != tc.count {
				t.Fatalf("%d events, answer %+v, err %v; want %d, code %q", len(d.Txn), a, d.Err, tc.count, tc.code)
			}
			if chunk := tc.count < 10 && tc.code == ""; a.Truncated != chunk || (chunk && a.NextCursor != d.Txn[len(d.Txn)-1].Key) {
				t.Fatalf("answer %+v", a)
			}
		})
	}
}

// TestDecideRangeRefusalRecorded: an atomic range delete refused for
// what lies under its prefix (too_many_keys, value_too_large) writes no
// event and one conflict record, as a refused write of a key does:
// naming the op, the prefix (as its key), the refusal's code as its
// reason and the request, under the correlation id the error carries.
func TestDecideRangeRefusalRecorded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	p := "tenant/a/project/b/r/"
	for _, tc := range []struct {
		name   string
		extra  int
		budget int
		code   string
	}{
		{"TooManyKeysRecorded", contract.MaxRangeKeys, 0, contract.ETooManyKeys},
		{"TooLargeRecorded", 0, 1500, contract.ETooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			states := rangeStates(now)
			for i := range tc.extra {
				k := fmt.Sprintf("%sn%05d", p, i)
				states[k] = keystate.State{Version: 1, Live: true, Entry: contract.Entry{Key: k, Version: 1, Value: json.RawMessage(`1`)}}
			}
			in := Input{States: states}
			for k := range states {
				in.Under.Keys = append(in.Under.Keys, k)
			}
			env := testEnv(now, 9)
			env.MaxAppendBytes = tc.budget
			c := &Range{Header: Header{Key: mustKey(t, "tenant/a/project/b/x"), Op: contract.OpDeleteRange, Principal: "q", RequestID: "r1"}, Prefix: p}
			d := c.Decide(in, env)
			var e *contract.Error
			if !errors.As(d.Err, &e) || e.Code != tc.code || len(d.Txn) != 0 || d.Event != nil {
				t.Fatalf("want %s and no event, got %d events, err %v", tc.code, len(d.Txn), d.Err)
			}
			r := d.Conflict
			if r == nil || r.ID == "" || e.CorrelationID != r.ID || r.Key != p || r.Scope != "tenant/a/project/b" || r.Op != contract.OpDeleteRange ||
				r.Reason != tc.code || r.ExpectedVersion != -1 || r.CurrentVersion != 0 || string(r.Attempted) != "null" || string(r.Current) != "null" ||
				r.Principal != "q" || r.RequestID != "r1" || !r.TS.Equal(now) || r.Semantics.Purpose != "other" || r.SchemaVersion != contract.SchemaVersion {
				t.Fatalf("conflict record %+v (error %+v)", r, e)
			}
		})
	}
}
