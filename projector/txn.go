package projector

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
)

// A reader of the projection never sees half of a Kafka transaction, hence
// never half of an eskv transaction (the writer appends all the events of
// one, and of its whole group commit, in one Kafka transaction). A poll
// can end inside a Kafka transaction (MaxBatch, fetch size limits), so the
// sink applies each partition only up to its last complete transaction
// and carries the rest, the tail, to the next batch: it is applied with
// the records that complete it, in one Postgres transaction. The stored
// offsets therefore only ever sit on a transaction boundary.

// settled returns how many of one partition's records (offset order,
// transaction markers included, aborted records already left out by
// read_committed) form whole Kafka transactions: the prefix up to the
// first transactional record whose producer's marker is not among recs.
// Records outside any transaction stand alone.
func settled(recs []*kgo.Record) int {
	open := make(map[int64]int) // producer ID → index of its first record since its last marker
	for i, r := range recs {
		switch {
		case r.Attrs.IsControl():
			delete(open, r.ProducerID)
		case r.Attrs.IsTransactional():
			if _, ok := open[r.ProducerID]; !ok {
				open[r.ProducerID] = i
			}
		}
	}
	n := len(recs)
	for _, i := range open {
		n = min(n, i)
	}
	return n
}

// take decides what of one partition's records (the carried tail first)
// to apply now: whole Kafka transactions, decoded, and the tail to carry.
// A record that does not decode is a poison pill: the transactions before
// its own are applied, nothing from its transaction on, nothing is
// carried, and poison names it.
func (p *Projector) take(recs []*kgo.Record) (batch []projection.Applied, carry []*kgo.Record, poison error) {
	return p.takeInto(nil, recs)
}

// takeInto is take appending to dst (batch holds dst first): gather
// fills one batch of every partition's, sized once (an Applied is about
// 400 bytes, and growing the batch by appends copied each several times).
func (p *Projector) takeInto(dst []projection.Applied, recs []*kgo.Record) (batch []projection.Applied, carry []*kgo.Record, poison error) {
	n := settled(recs)
	batch = slices.Grow(dst, n)
	for i, r := range recs[:n] {
		if r.Attrs.IsControl() {
			batch = append(batch, projection.Applied{Partition: r.Partition, Offset: r.Offset, Marker: true})
			continue
		}
		e, raw, err := changelog.EventVerbatim(r)
		if err != nil {
			p.log.Error("record does not decode; stopping the projector (poison pill)",
				"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", err)
			// batch[j] is recs[j]'s: cut it at the start of the pill's
			// transaction.
			return batch[:len(dst)+settled(recs[:i])], nil,
				fmt.Errorf("projector: poison pill at %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
		}
		batch = append(batch, projection.Applied{Partition: r.Partition, Offset: r.Offset, Event: e, Raw: raw})
	}
	return batch, recs[n:], nil
}

// txnGroup is what a Kafka transaction held of one eskv transaction.
type txnGroup struct {
	ID          string
	Size, Seen  int
	First, Last int64 // offsets
}

// incompleteTxns returns the eskv transactions (events sharing a TxnID)
// that a Kafka transaction of batch does not hold exactly whole: fewer or
// more events than their TxnSize, in offset order. batch is what take
// returned for one partition (whole transactions) and recs[i] is the
// record of batch[i]. The writer never splits a transaction; compaction
// shortens one whose events were superseded by later writes, and a
// projector catching up over compacted records reads it so.
func incompleteTxns(recs []*kgo.Record, batch []projection.Applied) []txnGroup {
	var bad []txnGroup
	check := func(groups map[string]*txnGroup) {
		for _, g := range groups {
			if g.Seen != g.Size {
				bad = append(bad, *g)
			}
		}
	}
	open := make(map[int64]map[string]*txnGroup) // producer ID → its transaction's groups
	for i := range batch {
		a, r := &batch[i], recs[i]
		switch {
		case a.Marker:
			check(open[r.ProducerID])
			delete(open, r.ProducerID)
		case a.Event.TxnID == "":
		case !r.Attrs.IsTransactional(): // a transaction of its own
			check(map[string]*txnGroup{"": {ID: a.Event.TxnID, Size: a.Event.TxnSize, Seen: 1, First: a.Offset, Last: a.Offset}})
		default:
			if open[r.ProducerID] == nil {
				open[r.ProducerID] = make(map[string]*txnGroup)
			}
			g := open[r.ProducerID][a.Event.TxnID]
			if g == nil {
				g = &txnGroup{ID: a.Event.TxnID, Size: a.Event.TxnSize, First: a.Offset}
				open[r.ProducerID][a.Event.TxnID] = g
			}
			g.Seen++
			g.Last = a.Offset
		}
	}
	slices.SortFunc(bad, func(a, b txnGroup) int { return cmp.Compare(a.First, b.First) })
	return bad
}
