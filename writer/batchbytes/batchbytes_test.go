package batchbytes

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// TestBatchAdmit: a write's records are admitted while the batch's
// records of each topic stay within its budget, left for the next batch
// when they fit only alone, and refused when they never fit.
func TestBatchAdmit(t *testing.T) {
	l := NewLimits(changelog.Topics{Changes: "c", Conflicts: "x"}, map[string]int{"c": 10_000 + batchHeadroom, "x": 5_000 + batchHeadroom})
	if l.budget["c"] != 10_000 || l.budget["x"] != 5_000 || l.ProducerLimit("c") != 10_000+batchHeadroom {
		t.Fatalf("limits %+v", l)
	}
	rec := func(topic string, n int) *kgo.Record { return &kgo.Record{Topic: topic, Value: make([]byte, n)} }
	size := func(r *kgo.Record) int { return changelog.RecordBytes(r) }
	b := NewBatch(l)
	for _, tc := range []struct {
		name string
		recs []*kgo.Record
		want Fit
	}{
		{"OKFirst", []*kgo.Record{rec("c", 6_000)}, Fits},
		{"FullBesideTheFirst", []*kgo.Record{rec("c", 6_000)}, Full},
		{"OKSmallStillFits", []*kgo.Record{rec("c", 3_000)}, Fits},
		{"OKConflictsHaveTheirOwnBudget", []*kgo.Record{rec("x", 4_000)}, Fits},
		{"FullInOneTopicIsFull", []*kgo.Record{rec("c", 10), rec("x", 2_000)}, Full},
		{"TooLargeAlone", []*kgo.Record{rec("c", 9_000), rec("c", 2_000)}, TooLarge},
		{"OKEmpty", nil, Fits},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f, _, _ := b.Admit(tc.recs); f != tc.want {
				t.Fatalf("admit: %d, want %d (used %v)", f, tc.want, b.used)
			}
		})
	}
	if want := size(rec("c", 6_000)) + size(rec("c", 3_000)); b.used["c"] != want {
		t.Fatalf("used %d of c, want %d (only the admitted writes)", b.used["c"], want)
	}
}

// TestLeastBytes: a write's least size counts its key, value and field
// values (every step of a transaction), and its 413 names the field a
// client shrinks and the budget.
func TestLeastBytes(t *testing.T) {
	k, err := contract.ParseKey("tenant/t/project/p/k")
	if err != nil {
		t.Fatal(err)
	}
	kv := &decide.KV{Header: decide.Header{Key: k}, Value: json.RawMessage(`"abc"`),
		Set: map[string]json.RawMessage{"a": json.RawMessage(`12`)}}
	want := len(k.String()) + 5 + 2
	if n := LeastBytes(kv); n != want {
		t.Errorf("LeastBytes(kv) = %d; want %d", n, want)
	}
	txn := &decide.Txn{Header: decide.Header{Key: k}, Steps: []decide.TxnStep{{Write: kv}, {Write: kv}}}
	if n := LeastBytes(txn); n != 2*want {
		t.Errorf("LeastBytes(txn) = %d; want %d", n, 2*want)
	}
	l := NewLimits(changelog.Topics{Changes: "c", Conflicts: "x"}, nil)
	for _, tc := range []struct {
		cmd   decide.Command
		field string
	}{{kv, "value"}, {txn, "ops"}} {
		err := l.ErrTooLarge(tc.cmd, "c", 1<<30)
		e, ok := errors.AsType[*contract.Error](err)
		if !ok || e.Code != contract.ETooLarge || e.Field != tc.field || !strings.Contains(e.Message, fmt.Sprint(l.Budget("c"))) {
			t.Errorf("ErrTooLarge: %v; want %s on %s naming the budget %d", err, contract.ETooLarge, tc.field, l.Budget("c"))
		}
	}
}
