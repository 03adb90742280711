package projector

import (
	"fmt"
	"log/slog"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// records builds one partition's records from spec, one word per record
// at offsets 0, 1, ...: "d<p>" a transactional event of producer p, "c<p>"
// producer p's transaction marker, "n" an event outside any transaction,
// "x<p>" a transactional record that does not decode. An event may name
// its eskv transaction and its size: "d1:a3" is an event of transaction a
// of 3 events.
func records(tb testing.TB, spec string) []*kgo.Record {
	tb.Helper()
	var rs []*kgo.Record
	for i, w := range strings.Fields(spec) {
		word, txn, _ := strings.Cut(w, ":")
		r := &kgo.Record{Topic: "kv.changes", Partition: 3, Offset: int64(i), ProducerID: -1}
		if word != "n" {
			pid, err := strconv.ParseInt(word[1:], 10, 64)
			if err != nil {
				tb.Fatalf("spec %q: %v", w, err)
			}
			r.ProducerID = pid
			r.Attrs = kgo.NewRecordAttrs(kgo.RecordAttrsOpts{Transactional: true, Control: word[0] == 'c'})
		}
		e := contract.Event{SchemaVersion: contract.SchemaVersion, Key: fmt.Sprintf("tenant/t/project/p/k%d", i),
			Scope: "tenant/t/project/p", Version: 1, Kind: contract.KindPut, Op: contract.OpSet,
			After: []byte(`1`), TS: time.Unix(0, 0).UTC()}
		if txn != "" {
			e.TxnID = txn[:1]
			e.TxnSize, _ = strconv.Atoi(txn[1:])
		}
		switch word[0] {
		case 'c':
		case 'x':
			r.Value = []byte(`{not json`)
		default:
			b, err := codec.MarshalEvent(&e)
			if err != nil {
				tb.Fatal(err)
			}
			r.Key, r.Value = []byte(e.Key), b
		}
		rs = append(rs, r)
	}
	return rs
}

func testProjector() *Projector {
	m, err := newMetrics(nil)
	if err != nil {
		panic(err)
	}
	return &Projector{cfg: Config{Topic: "kv.changes"}, log: slog.New(slog.DiscardHandler), m: m}
}

// TestTailCarriedUntilRevoked: the start of a transaction waits for its
// marker in the next batch, unless its partition was revoked meanwhile
// (the next owner reads it again from the stored offsets).
func TestTailCarriedUntilRevoked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		revoked map[string][]int32
		apply   int
	}{
		{"Carried", nil, 3},
		{"CarriedPastAnotherPartitionsRevoke", map[string][]int32{"kv.changes": {1, 2}, "kv.conflicts": {3}}, 3},
		{"DroppedOnRevoke", map[string][]int32{"kv.changes": {3}}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &sink{Projector: testProjector(), tail: map[int32][]*kgo.Record{}}
			recs := records(t, "d1 d1 c1")
			if batch, err := s.gather(recs[:2]); len(batch) != 0 || err != nil {
				t.Fatalf("first batch: applied %d, %v; want nothing yet", len(batch), err)
			}
			if tc.revoked != nil {
				s.Revoked(tc.revoked)
			}
			batch, err := s.gather(recs[2:])
			if len(batch) != tc.apply || err != nil || batch[len(batch)-1].Offset != 2 {
				t.Fatalf("second batch: applied %d up to %v, %v; want %d up to the marker", len(batch), batch, err, tc.apply)
			}
		})
	}
}

func TestTake(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec string
		apply      int // records applied now; the rest is carried
		poison     bool
	}{
		{"Empty", "", 0, false},
		{"OneTransaction", "d1 d1 d1 c1", 4, false},
		{"TransactionsThenOpenOne", "d1 c1 d1 d1 c1 d1 d1", 5, false},
		{"OnlyAnOpenTransaction", "d1 d1 d1", 0, false},
		{"MarkerAlone", "c1 d1 d1 c1", 4, false}, // a read resumed at an old, mid-transaction offset
		{"AbortedTransactionsMarkerOnly", "c1 c1 d1 c1", 4, false},
		{"NonTransactional", "n n d1 c1 n", 5, false},
		{"NonTransactionalAfterAnOpenTransaction", "d1 c1 d1 n n", 2, false},
		{"InterleavedProducersBothClosed", "d1 d2 d1 c2 c1", 5, false},
		{"InterleavedProducersOneOpen", "d1 d2 d1 c1 d2 d1", 1, false}, // producer 2 opened at offset 1
		{"InterleavedOtherClosesFirst", "d2 d1 c2 d1", 1, false},
		{"PoisonPillAppliesTheTransactionsBefore", "d1 c1 d1 x1 d1 c1 d1 c1", 2, true},
		{"PoisonPillFirst", "x1 c1", 0, true},
		{"PoisonPillNonTransactional", "n n x1 c1", 2, true},
		{"PoisonPillInTheCarriedTail", "d1 c1 d1 x1", 2, false}, // found once its marker comes
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := records(t, tc.spec)
			batch, carry, poison := testProjector().take(recs)
			if len(batch) != tc.apply {
				t.Errorf("applied %d records, want %d", len(batch), tc.apply)
			}
			for i := range batch {
				if batch[i].Offset != recs[i].Offset || batch[i].Marker != recs[i].Attrs.IsControl() {
					t.Errorf("batch[%d] = offset %d marker %v, want record %d's", i, batch[i].Offset, batch[i].Marker, i)
				}
			}
			wantCarry := recs[tc.apply:]
			if tc.poison {
				wantCarry = nil
			}
			if len(carry) != len(wantCarry) || (len(carry) > 0 && carry[0] != wantCarry[0]) {
				t.Errorf("carried %d records, want %d (from offset %d)", len(carry), len(wantCarry), tc.apply)
			}
			if (poison != nil) != tc.poison {
				t.Errorf("poison = %v, want poison %v", poison, tc.poison)
			}
		})
	}
}

func TestIncompleteTxns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec string
		want       []txnGroup
	}{
		{"NoTransactions", "d1 d1 c1 n", nil},
		{"Whole", "d1:a2 d1:a2 c1", nil},
		{"TwoWholeInOneKafkaTransaction", "d1:a2 d1:b1 d1:a2 c1", nil},
		{"WholeNonTransactional", "n:a1", nil},
		{"SplitOverTwoKafkaTransactions", "d1:a3 d1:a3 c1 d1:a3 c1", []txnGroup{
			{ID: "a", Size: 3, Seen: 2, First: 0, Last: 1}, {ID: "a", Size: 3, Seen: 1, First: 3, Last: 3},
		}},
		{"MoreThanItsSize", "d1:a1 d1:a1 c1", []txnGroup{{ID: "a", Size: 1, Seen: 2, First: 0, Last: 1}}},
		{"NonTransactionalPart", "n:a2 d1:a2 c1", []txnGroup{
			{ID: "a", Size: 2, Seen: 1, First: 0, Last: 0}, {ID: "a", Size: 2, Seen: 1, First: 1, Last: 1},
		}},
		{"InterleavedProducers", "d1:a2 d2:b2 d1:a2 d2:b2 c2 c1", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs := records(t, tc.spec)
			batch, carry, err := testProjector().take(recs)
			if err != nil || len(carry) > 0 {
				t.Fatalf("take: carried %d, %v; want everything applied", len(carry), err)
			}
			if got := incompleteTxns(recs, batch); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("incompleteTxns = %+v, want %+v", got, tc.want)
			}
		})
	}
}
