// Package batchbytes bounds in bytes what one partition of the writer
// appends in one round, below what the brokers accept.
//
// A partition's records of one round reach the brokers as record batches
// of the shared transaction (package committer), and a broker refuses a
// batch over its topic's max.message.bytes (MESSAGE_TOO_LARGE): that
// fails the whole transaction, every partition of the round with it. A
// batch bounded by count (the writer's MaxBatch) alone does not stop one
// tenant's valid writes (60 concurrent PUTs of 47 KB, a transaction of
// 2.9 MB) from doing so. So:
//
//   - at start the writer reads each topic's max.message.bytes
//     (changelog.MaxMessageBytes); Limits takes the smaller of it and the
//     producer's batch limit (producerBatchMaxBytes), which the producer
//     is told (ProducerLimit: kgo never builds a batch the broker
//     refuses); a partition's records of one topic in one round take at
//     most that less batchHeadroom, counted by changelog.RecordBytes
//     (Budget);
//   - a write whose written values and keys alone (LeastBytes) exceed the
//     kv.changes budget is refused 413 value_too_large (ErrTooLarge)
//     before it is queued, and one whose records do once decided (their
//     before and after values, a conflict's) is refused 413 before its
//     effects are applied to the batch's states (Batch.Admit answers
//     TooLarge): the writes decided after it never saw it;
//   - a write whose records fit but not beside those the batch admitted
//     before it waits for the partition's next batch, first in it
//     (Batch.Admit answers Full), its decision discarded unanswered, or
//     not even made when its estimated size does not fit (Estimate,
//     Batch.MayFit); the writes after it are still decided, against
//     states without it. A round never fails because of one member, and
//     a batch's first write always fits.
package batchbytes

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
)

// producerBatchMaxBytes is the shared producer's limit on a record batch
// when the topic allows more.
const producerBatchMaxBytes = 4 << 20

// batchHeadroom is what a partition's budget leaves of a topic's limit:
// the record batch's header (changelog.BatchOverhead) and a margin.
const batchHeadroom = 1 << 10

// Limits bounds what one partition appends in one round: its budget of
// changelog.RecordBytes per topic, and each topic's limit as the
// producer is told it.
type Limits struct {
	changes, conflicts string
	// budget is the bytes of records of each topic one partition puts in
	// one round.
	budget map[string]int
	// max is each topic's max.message.bytes bounded by
	// producerBatchMaxBytes (kgo.ProducerBatchMaxBytesFn).
	max map[string]int32
}

// NewLimits returns the limits of t's topics, whose max.message.bytes
// are maxMessage (Kafka's default for a topic it does not name).
func NewLimits(t changelog.Topics, maxMessage map[string]int) *Limits {
	l := &Limits{changes: t.Changes, conflicts: t.Conflicts, budget: map[string]int{}, max: map[string]int32{}}
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

// ProducerLimit is the producer's batch limit for topic
// (kgo.ProducerBatchMaxBytesFn).
func (l *Limits) ProducerLimit(topic string) int32 {
	if m, ok := l.max[topic]; ok {
		return m
	}
	return producerBatchMaxBytes
}

// Budget is the bytes of records of topic one partition puts in one
// round.
func (l *Limits) Budget(topic string) int { return l.budget[topic] }

// ErrTooLarge is the 413 of a write whose records of topic take size
// bytes, more than a partition's budget.
func (l *Limits) ErrTooLarge(c decide.Command, topic string, size int) error {
	field := "value"
	if _, ok := c.(*decide.Txn); ok {
		field = "ops"
	}
	return contract.FieldErrorf(contract.ETooLarge, field,
		"the write takes at least %d bytes in %s, more than the %d bytes a partition may append in one Kafka transaction (the topic's max.message.bytes less headroom): write fewer or smaller values",
		size, topic, l.budget[topic])
}

// LeastBytes is at most what c's events take in kv.changes: the values
// and field values it writes, and its keys. A write over the budget by
// this count alone is refused before it is queued.
func LeastBytes(c decide.Command) int {
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

// kvBytes is LeastBytes of a KV write: its key, value and field values.
func kvBytes(r *decide.KV) int {
	n := len(r.Key.String()) + len(r.Value)
	for _, v := range r.Set {
		n += len(v)
	}
	return n
}

// Estimate is about what c's records take in kv.changes, before it is
// decided on states: its values and keys (LeastBytes) and the values of
// the keys it reads, which its events carry as before. It decides only
// whether deciding c now is worth it (Batch.MayFit): too high, c waits a
// batch, first in the next one, where it is decided anyway.
func Estimate(c decide.Command, states map[string]keystate.State) int {
	n := LeastBytes(c)
	for _, k := range decide.Keys(c) {
		n += len(states[k].Entry.Value)
	}
	return n
}

// Fit is what a batch's budget says of a write's records.
type Fit int

const (
	Fits     Fit = iota // admitted
	Full                // they fit alone, not beside the batch's: next batch
	TooLarge            // they never fit: 413
)

// Batch counts the bytes per topic a batch admitted.
type Batch struct {
	lim  *Limits
	used map[string]int
}

// NewBatch returns an empty batch's count under l.
func NewBatch(l *Limits) Batch {
	return Batch{lim: l, used: make(map[string]int, 2)}
}

// MayFit reports whether a write whose records take about size bytes in
// kv.changes (Estimate) may fit beside what the batch admitted: when
// not, it is not decided now. The first write of a batch always is.
func (b *Batch) MayFit(size int) bool {
	used := b.used[b.lim.changes]
	return used == 0 || used+size <= b.lim.budget[b.lim.changes]
}

// Admit counts recs, one write's records, when they fit beside what the
// batch admitted; otherwise it says why not and which topic and size.
func (b *Batch) Admit(recs []*kgo.Record) (f Fit, topic string, size int) {
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
			return TooLarge, t.topic, t.size
		case b.used[t.topic]+t.size > b.lim.budget[t.topic]:
			f, topic, size = Full, t.topic, t.size
		}
	}
	if f == Fits {
		b.used[b.lim.changes] += changes
		b.used[b.lim.conflicts] += conflicts
	}
	return f, topic, size
}
