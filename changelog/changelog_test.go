package changelog_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
)

// TestRecordKeys: Record keys a record by Event.RecordKey (an element
// change by its key and element) and names the KV key in ce_subject;
// Event accepts that key, and for an element change also the KV key (a
// record written before element changes had keys of their own), and
// refuses any other.
func TestRecordKeys(t *testing.T) {
	const k = "tenant/t/project/p/set"
	ev := func(el *events.Element) *events.Event {
		return &events.Event{SchemaVersion: events.SchemaVersion, Key: k, Scope: "tenant/t/project/p", Version: 2, PrevVersion: 1,
			Kind: events.KindPut, Op: events.OpSAdd, After: json.RawMessage(`{"type":"set","size":1,"since":1}`),
			TS: time.Unix(1, 0), Semantics: events.Semantics{Purpose: "set"}, Element: el}
	}
	add := &events.Element{Op: events.ElementAdd, Member: "m é"}
	for _, tc := range []struct {
		name    string
		e       *events.Event
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
