package logcheck

import (
	"fmt"
	"slices"
)

// TxnFindings are the multi-key transactions (POST /v1/txn) of a log and
// the ways they are not whole. The writer appends a transaction's events
// (one per written key, sharing txnId and txnSize) together in one Kafka
// transaction, so a committed log holds each transaction entirely, its
// events next to each other in one partition, or not at all.
type TxnFindings struct {
	// Txns counts the transaction ids in the log, Events their events.
	Txns, Events int
	// Sizes counts the transactions by size.
	Sizes map[int]int
	// Partial: a txnId with fewer or more events than its txnSize, or
	// events that disagree on txnSize. Split: a txnId in two partitions,
	// or with another event between two of its own. RepeatedKeys: a
	// txnId with two events of one key.
	Partial, Split, RepeatedKeys []string
}

// Violations lists every finding.
func (f TxnFindings) Violations() []string { return slices.Concat(f.Partial, f.Split, f.RepeatedKeys) }

// Txns checks that every transaction in evs (a log in order per
// partition, as Read returns it) is whole. Events without a txnId are
// single-key writes and are skipped.
func Txns(evs []Event) TxnFindings {
	type txn struct {
		partition int32
		size      int
		last      int // index in evs of its latest event
		count     int
		keys      map[string]bool
	}
	f := TxnFindings{Sizes: map[int]int{}}
	txns := map[string]*txn{}
	var order []string
	lastOf := map[int32]int{} // partition: index in evs of its previous event
	for i, le := range evs {
		prev, hadPrev := lastOf[le.Partition]
		lastOf[le.Partition] = i
		e := le.Event
		if e.TxnID == "" {
			continue
		}
		f.Events++
		t, ok := txns[e.TxnID]
		if !ok {
			t = &txn{partition: le.Partition, size: e.TxnSize, keys: map[string]bool{}}
			txns[e.TxnID] = t
			order = append(order, e.TxnID)
		} else {
			switch {
			case t.partition != le.Partition:
				f.Split = append(f.Split, fmt.Sprintf("txn %s in partitions %d and %d (%s@%d at %d/%d)", e.TxnID, t.partition, le.Partition, e.Key, e.Version, le.Partition, le.Offset))
			case !hadPrev || prev != t.last:
				f.Split = append(f.Split, fmt.Sprintf("txn %s: %s@%d at %d/%d does not follow its previous event (another event is between them)", e.TxnID, e.Key, e.Version, le.Partition, le.Offset))
			}
			if e.TxnSize != t.size {
				f.Partial = append(f.Partial, fmt.Sprintf("txn %s: %s@%d says txnSize %d, an earlier event %d", e.TxnID, e.Key, e.Version, e.TxnSize, t.size))
			}
		}
		if t.keys[e.Key] {
			f.RepeatedKeys = append(f.RepeatedKeys, fmt.Sprintf("txn %s writes %s twice (version %d at %d/%d)", e.TxnID, e.Key, e.Version, le.Partition, le.Offset))
		}
		t.keys[e.Key] = true
		t.count++
		t.last = i
	}
	f.Txns = len(txns)
	for _, id := range order {
		t := txns[id]
		f.Sizes[t.count]++
		if t.count != t.size {
			f.Partial = append(f.Partial, fmt.Sprintf("txn %s has %d events in the log, txnSize %d", id, t.count, t.size))
		}
	}
	return f
}
