package changelog_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
)

// TestRecordKeys: Record keys a record by RecordKey (an element
// change by its key and element) and names the KV key in ce_subject;
// Event accepts that key, and for an element change also the KV key (a
// record written before element changes had keys of their own), and
// refuses any other.
func TestRecordKeys(t *testing.T) {
	const k = "tenant/t/project/p/set"
	ev := func(el *contract.Element) *contract.Event {
		return &contract.Event{SchemaVersion: contract.SchemaVersion, Key: k, Scope: "tenant/t/project/p", Version: 2, PrevVersion: 1,
			Kind: contract.KindPut, Op: contract.OpSAdd, After: json.RawMessage(`{"type":"set","size":1,"since":1}`),
			TS: time.Unix(1, 0), Semantics: contract.Semantics{Purpose: "set"}, Element: el}
	}
	add := &contract.Element{Op: contract.ElementAdd, Member: "m é"}
	for _, tc := range []struct {
		name    string
		e       *contract.Event
		key     string // "" keeps the key Record gives
		wantKey string // the key Record gives
		err     bool
	}{
		{"OKPlain", ev(nil), "", k, false},
		{"OKElement", ev(add), "", k + "\x00m é", false},
		{"OKElementWrittenBefore", ev(add), k, k + "\x00m é", false},
		{"ErrOtherMember", ev(add), k + "\x00other", k + "\x00m é", true},
		{"ErrPlainWithSuffix", ev(nil), k + "\x00m é", k, true},
		{"ErrOtherKey", ev(nil), "tenant/t/project/p/other", k, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := changelog.Record(tc.e, "kv.changes", 3, "test")
			if err != nil {
				t.Fatal(err)
			}
			if string(r.Key) != tc.wantKey || r.Partition != 3 {
				t.Fatalf("record key %q partition %d, want %q 3", r.Key, r.Partition, tc.wantKey)
			}
			for _, h := range r.Headers {
				if h.Key == "ce_subject" && string(h.Value) != k {
					t.Fatalf("ce_subject %q, want the KV key", h.Value)
				}
			}
			if tc.key != "" {
				r.Key = []byte(tc.key)
			}
			e, err := changelog.Event(r)
			if (err != nil) != tc.err || (err != nil && !strings.Contains(err.Error(), "record key")) {
				t.Fatalf("Event: %v, want error %v", err, tc.err)
			}
			if err == nil && (e.Key != k || e.Version != 2) {
				t.Fatalf("decoded %s@%d", e.Key, e.Version)
			}
		})
	}
}

// TestRecordHeaders: a change record carries exactly
// changelog.CloudEventHeaders, in order, and no two records share a
// per-event value's memory.
func TestRecordHeaders(t *testing.T) {
	evs := []*contract.Event{
		{SchemaVersion: contract.SchemaVersion, Key: "tenant/t/project/p/k", Scope: "tenant/t/project/p", Version: 7, PrevVersion: 6,
			Kind: contract.KindPut, Op: contract.OpPut, After: json.RawMessage(`1`), TS: time.Date(2026, 3, 1, 10, 15, 30, 123456789, time.UTC)},
		{SchemaVersion: contract.SchemaVersion, Key: "tenant/t/project/p/é", Scope: "tenant/t/project/p", Version: 1,
			Kind: contract.KindDelete, Op: contract.OpDelete, TS: time.Date(2026, 3, 1, 10, 15, 30, 0, time.FixedZone("x", 3600))},
		{SchemaVersion: contract.SchemaVersion, Key: "tenant/t/project/p/set", Scope: "tenant/t/project/p", Version: 2, PrevVersion: 1,
			Kind: contract.KindPut, Op: contract.OpSAdd, After: json.RawMessage(`{"type":"set","size":1,"since":1}`), TS: time.Unix(1, 0),
			Semantics: contract.Semantics{Purpose: "set"}, Element: &contract.Element{Op: contract.ElementAdd, Member: "m"}},
	}
	var recs []string
	for _, e := range evs {
		r, err := changelog.Record(e, "kv.changes", 0, "eskv-writer/w1")
		if err != nil {
			t.Fatal(err)
		}
		want := changelog.CloudEventHeaders(e, "eskv-writer/w1")
		if len(r.Headers) != len(want) {
			t.Fatalf("%d headers, want %d", len(r.Headers), len(want))
		}
		for i, h := range want {
			if r.Headers[i].Key != h.Key || string(r.Headers[i].Value) != string(h.Value) {
				t.Fatalf("header %d: %s=%q, want %s=%q", i, r.Headers[i].Key, r.Headers[i].Value, h.Key, h.Value)
			}
		}
		// Appending to one value must not reach into the next.
		for i := range r.Headers {
			if cap(r.Headers[i].Value) != len(r.Headers[i].Value) && r.Headers[i].Key != "ce_specversion" &&
				r.Headers[i].Key != "ce_dataschema" && r.Headers[i].Key != "content-type" {
				t.Fatalf("header %s has room behind it (%d of %d)", r.Headers[i].Key, len(r.Headers[i].Value), cap(r.Headers[i].Value))
			}
		}
		recs = append(recs, string(r.Key))
	}
	if recs[2] != "tenant/t/project/p/set\x00m" {
		t.Fatalf("record key %q", recs[2])
	}
}
