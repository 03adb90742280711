package writer

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// Batches bounded in bytes.
//
// A partition's records of one round reach the brokers as record batches
// of the shared transaction (committer.go), and a broker refuses a batch
// over its topic's max.message.bytes (MESSAGE_TOO_LARGE): that fails the
// whole transaction, every partition of the round with it. A batch
// bounded by count (MaxBatch) alone does not stop one tenant's valid
// writes (60 concurrent PUTs of 47 KB, a transaction of 2.9 MB) from
// doing so. So:
//
//   - at start the writer reads each topic's max.message.bytes
//     (changelog.MaxMessageBytes), takes the smaller of it and the
//     producer's batch limit (producerBatchMaxBytes), and tells the
//     producer (so kgo never builds a batch the broker refuses); a
//     partition's records of one topic in one round take at most that
//     less batchHeadroom, counted by changelog.RecordBytes (batchLimits);
//   - a write whose written values and keys alone exceed the kv.changes
//     budget is refused 413 value_too_large before it is queued
//     (Writer.Do), and one whose records do once decided (their before
//     and after values, a conflict's) is refused 413 before its effects
//     are applied to the batch's states: the writes decided after it
//     never saw it;
//   - a write whose records fit but not beside those the batch admitted
//     before it waits for the partition's next batch, first in it
//     (batchBudget.admit returns full: partition.process carries it),
//     its decision discarded unanswered, or not even made when its
//     estimated size does not fit (estimate, mayFit); the writes after
//     it are still decided, against states without it. A round never fails because of
//     one member, and a batch's first write always fits.

// producerBatchMaxBytes is the shared producer's limit on a record batch
// when the topic allows more.
const producerBatchMaxBytes = 4 << 20

// batchHeadroom is what a partition's budget leaves of a topic's limit:
// the record batch's header (changelog.BatchOverhead) and a margin.
const batchHeadroom = 1 << 10

// batchLimits bounds what one partition appends in one round: its budget
// of changelog.RecordBytes per topic, and each topic's limit as the
// producer is told it.
type batchLimits struct {
	changes, conflicts string
	// budget is the bytes of records of each topic one partition puts in
	// one round.
	budget map[string]int
	// max is each topic's max.message.bytes bounded by
	// producerBatchMaxBytes (kgo.ProducerBatchMaxBytesFn).
	max map[string]int32
}

// newBatchLimits returns the limits of t's topics, whose
// max.message.bytes are maxMessage.
func newBatchLimits(t changelog.Topics, maxMessage map[string]int) *batchLimits {
	l := &batchLimits{changes: t.Changes, conflicts: t.Conflicts, budget: map[string]int{}, max: map[string]int32{}}
	for _, topic := range []string{t.Changes, t.Conflicts} {
		m := min(maxMessage[topic], producerBatchMaxBytes)
		if m <= 0 {
			m = changelog.DefaultMaxMessageBytes
		}
		l.max[topic] = int32(m)
		l.budget[topic] = max(m-batchHeadroom, 1)
	}
	return l
}

// producerLimit is the producer's batch limit for topic
// (kgo.ProducerBatchMaxBytesFn).
func (l *batchLimits) producerLimit(topic string) int32 {
	if m, ok := l.max[topic]; ok {
		return m
	}
	return producerBatchMaxBytes
}

// tooLarge is the 413 of a write whose records of topic take size bytes,
// more than a partition's budget.
func (l *batchLimits) tooLarge(c decide.Command, topic string, size int) error {
	field := "value"
	if _, ok := c.(*decide.Txn); ok {
		field = "ops"
	}
	return contract.FieldErrorf(contract.ETooLarge, field,
		"the write takes at least %d bytes in %s, more than the %d bytes a partition may append in one Kafka transaction (the topic's max.message.bytes less headroom): write fewer or smaller values",
		size, topic, l.budget[topic])
}

// leastBytes is at most what c's events take in kv.changes: the values
// and field values it writes, and its keys. A write over the budget by
// this count alone is refused before it is queued.
func leastBytes(c decide.Command) int {
	switch c := c.(type) {
	case *decide.Txn:
		n := 0
		for _, s := range c.Steps {
			n += kvBytes(s.Write)
		}
		return n
	case *decide.KV:
		return kvBytes(c)
	case *decide.Queue:
		return len(c.Key.String()) + len(c.Value)
	case *decide.List:
		return len(c.Key.String()) + len(c.Value)
	}
	return len(c.Head().Key.String())
}

// kvBytes is leastBytes of a KV write: its key, value and field values.
func kvBytes(r *decide.KV) int {
	n := len(r.Key.String()) + len(r.Value)
	for _, v := range r.Set {
		n += len(v)
	}
	return n
}

// estimate is about what c's records take in kv.changes, before it is
// decided on states: its values and keys (leastBytes) and the values of
// the keys it reads, which its events carry as before. It decides only
// whether deciding c now is worth it (batchBudget.mayFit): too high, c
// waits a batch, first in the next one, where it is decided anyway.
func estimate(c decide.Command, states map[string]contract.State) int {
	n := leastBytes(c)
	for _, k := range decide.Keys(c) {
		n += len(states[k].Entry.Value)
	}
	return n
}

// fit is what a batch's budget says of a write's records.
type fit int

const (
	fits     fit = iota // admitted
	full                // they fit alone, not beside the batch's: next batch
	tooLarge            // they never fit: 413
)

// batchBudget counts the bytes per topic a batch admitted.
type batchBudget struct {
	lim  *batchLimits
	used map[string]int
}

func newBatchBudget(l *batchLimits) batchBudget {
	return batchBudget{lim: l, used: make(map[string]int, 2)}
}

// mayFit reports whether a write whose records take about size bytes in
// kv.changes (estimate) may fit beside what the batch admitted: when
// not, it is not decided now. The first write of a batch always is.
func (b *batchBudget) mayFit(size int) bool {
	used := b.used[b.lim.changes]
	return used == 0 || used+size <= b.lim.budget[b.lim.changes]
}

// admit counts recs, one write's records, when they fit beside what the
// batch admitted; otherwise it says why not and which topic and size.
func (b *batchBudget) admit(recs []*kgo.Record) (f fit, topic string, size int) {
	var changes, conflicts int
	for _, r := range recs {
		if r.Topic == b.lim.conflicts {
			conflicts += changelog.RecordBytes(r)
		} else {
			changes += changelog.RecordBytes(r)
		}
	}
	for _, t := range []struct {
		topic string
		size  int
	}{{b.lim.changes, changes}, {b.lim.conflicts, conflicts}} {
		switch {
		case t.size > b.lim.budget[t.topic]:
			return tooLarge, t.topic, t.size
		case b.used[t.topic]+t.size > b.lim.budget[t.topic]:
			f, topic, size = full, t.topic, t.size
		}
	}
	if f == fits {
		b.used[b.lim.changes] += changes
		b.used[b.lim.conflicts] += conflicts
	}
	return f, topic, size
}

// errDeferred marks, in a batch's decisions, a write its budget left for
// the next batch: it is not answered.
var errDeferred = errors.New("deferred to the next batch")
