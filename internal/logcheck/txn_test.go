package logcheck

import (
	"testing"
	"time"
)

func TestTxns(t *testing.T) {
	// tx gives e the transaction id and size; a single write has none.
	tx := func(e Event, id string, size int) Event {
		e.Event.TxnID, e.Event.TxnSize = id, size
		return e
	}
	a1 := ev(0, 1, "a", 1, "a-v1", time.Second, 1)
	b1 := ev(0, 2, "b", 1, "b-v1", time.Second, 1)
	c1 := ev(0, 3, "c", 1, "c-v1", time.Second, 1)
	d1 := ev(1, 1, "d", 1, "d-v1", time.Second, 1)
	a2 := ev(0, 4, "a", 2, "a-v2", 2*time.Second, 1)
	for _, tc := range []struct {
		name                             string
		evs                              []Event
		txns, partial, split, repeatKeys int
	}{
		{"OKWhole", []Event{tx(a1, "t1", 2), tx(b1, "t1", 2), c1, tx(d1, "t2", 1), tx(a2, "t3", 1)}, 3, 0, 0, 0},
		// Another partition's events between them do not split a
		// transaction: the log is in order per partition.
		{"OKInterleavedPartitions", []Event{tx(a1, "t1", 2), d1, tx(b1, "t1", 2)}, 1, 0, 0, 0},
		{"ErrMissingEvent", []Event{tx(a1, "t1", 3), tx(b1, "t1", 3), c1}, 1, 1, 0, 0},
		{"ErrExtraEvent", []Event{tx(a1, "t1", 1), tx(b1, "t1", 1)}, 1, 1, 0, 0},
		{"ErrSizesDisagree", []Event{tx(a1, "t1", 2), tx(b1, "t1", 3)}, 1, 1, 0, 0},
		{"ErrInterleaved", []Event{tx(a1, "t1", 2), c1, tx(b1, "t1", 2)}, 1, 0, 1, 0},
		{"ErrTwoPartitions", []Event{tx(a1, "t1", 2), tx(d1, "t1", 2)}, 1, 0, 1, 0},
		{"ErrKeyTwice", []Event{tx(a1, "t1", 2), tx(a2, "t1", 2)}, 1, 0, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Txns(tc.evs)
			if f.Txns != tc.txns || len(f.Partial) != tc.partial || len(f.Split) != tc.split || len(f.RepeatedKeys) != tc.repeatKeys {
				t.Fatalf("txns %d partial %v split %v repeated keys %v; want %d, %d, %d, %d",
					f.Txns, f.Partial, f.Split, f.RepeatedKeys, tc.txns, tc.partial, tc.split, tc.repeatKeys)
			}
		})
	}
}
