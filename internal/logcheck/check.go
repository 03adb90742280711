package logcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// Findings are the violations found in the log itself.
type Findings struct {
	Events, Keys int
	// Duplicates: a (key, version) committed twice. Gaps: a key's version
	// that is not its previous one plus one (the first must be 1).
	Duplicates, Gaps []string
	// ChainBreaks: an event whose prevVersion or before does not match
	// the key's previous event.
	ChainBreaks []string
	// EpochMismatches: an event committed under a writerEpoch of its
	// partition (the ownership epoch its writer fenced kv-writer-p<N>
	// with) by another producer than the earlier events of that
	// writerEpoch: one ownership is one writer, whose shared producer
	// commits all of it (a second producer there is a zombie or a split
	// brain). EpochRegressions: a partition where an event's writerEpoch
	// is lower than an earlier one's (an older owner committed after a
	// newer one), or where a producer's epoch is lower than at its
	// earlier commit on the partition (its transactions are sequential).
	EpochMismatches, EpochRegressions []string
}

func (f Findings) VersionViolations() int { return len(f.Duplicates) + len(f.Gaps) }

// Violations lists every finding.
func (f Findings) Violations() []string {
	return slices.Concat(f.Duplicates, f.Gaps, f.ChainBreaks, f.EpochMismatches, f.EpochRegressions)
}

// Check checks the log's own invariants: per key, versions 1, 2, 3, ...
// each once, each event continuing the previous one; per partition,
// writer epochs never going back, one producer per writer epoch, and each
// producer's epochs never going back.
func Check(evs []Event) Findings {
	var f Findings
	f.Events = len(evs)
	last := map[string]contract.Event{}
	seen := map[string]bool{}
	ep := epochs{lastWriterEpoch: map[int32]int64{}, lastProducer: map[int32]producer{},
		producerEpoch: map[int32]map[int64]int16{}, maxEpoch: map[int64]int16{}}
	for _, le := range evs {
		ep.maxEpoch[le.ProducerID] = max(ep.maxEpoch[le.ProducerID], le.ProducerEpoch)
	}
	for _, le := range evs {
		e := le.Event
		id := fmt.Sprintf("%s@%d", e.Key, e.Version)
		prev, had := last[e.Key]
		switch {
		case seen[id]:
			f.Duplicates = append(f.Duplicates, fmt.Sprintf("%s again at %d/%d", id, le.Partition, le.Offset))
		case e.Version != prev.Version+1:
			f.Gaps = append(f.Gaps, fmt.Sprintf("%s at %d/%d follows version %d", id, le.Partition, le.Offset, prev.Version))
		case e.PrevVersion != e.Version-1:
			f.ChainBreaks = append(f.ChainBreaks, fmt.Sprintf("%s at %d/%d has prevVersion %d", id, le.Partition, le.Offset, e.PrevVersion))
		case had && prev.Live() && !jsonEqual(e.Before, prev.After):
			f.ChainBreaks = append(f.ChainBreaks, fmt.Sprintf("%s at %d/%d has before %s, version %d had %s", id, le.Partition, le.Offset, e.Before, prev.Version, prev.After))
		}
		seen[id] = true
		if e.Version > prev.Version {
			last[e.Key] = e
		}

		ep.check(&f, le, id)
	}
	f.Keys = len(last)
	return f
}

type producer struct {
	id    int64
	epoch int16
}

// epochs is what Check knows of writer epochs and producers so far.
type epochs struct {
	lastWriterEpoch map[int32]int64           // by partition
	lastProducer    map[int32]producer        // by partition
	producerEpoch   map[int32]map[int64]int16 // by partition and producer id
	// The highest epoch each producer committed at anywhere: one that
	// ran out of epochs may have last touched a partition well before
	// (it commits the rounds of every partition of its writer).
	maxEpoch map[int64]int16
}

// check checks le (id names it) against the partition's writer epoch and
// producer so far, and records them.
func (ep *epochs) check(f *Findings, le Event, id string) {
	lastWriterEpoch, lastProducer, producerEpoch, maxEpoch := ep.lastWriterEpoch, ep.lastProducer, ep.producerEpoch, ep.maxEpoch
	e, part := le.Event, le.Partition
	cur := producer{le.ProducerID, le.ProducerEpoch}
	we, seen := lastWriterEpoch[part]
	if seen && e.WriterEpoch < we {
		f.EpochRegressions = append(f.EpochRegressions, fmt.Sprintf("partition %d offset %d: %s decided at writerEpoch %d (%s) after an event of writerEpoch %d",
			part, le.Offset, id, e.WriterEpoch, le.Source, we))
	}
	// Within one writerEpoch the writer's shared producer commits
	// everything. Its id changes only when the broker gives it a new one
	// after its epoch ran out (transactions v2 bump the epoch at every
	// commit, the marker one above the records'; Kafka and kfake roll
	// over at MaxInt16-1): the earlier producer's last records anywhere
	// are then at MaxInt16-2 or above, however long ago it last
	// committed this partition.
	if lp := lastProducer[part]; seen && e.WriterEpoch == we && cur.id != lp.id && maxEpoch[lp.id] < math.MaxInt16-2 {
		f.EpochMismatches = append(f.EpochMismatches, fmt.Sprintf("%s at %d/%d: writerEpoch %d committed by producer %d epoch %d (%s), earlier by producer %d epoch %d",
			id, part, le.Offset, e.WriterEpoch, cur.id, cur.epoch, le.Source, lp.id, lp.epoch))
	}
	if producerEpoch[part] == nil {
		producerEpoch[part] = map[int64]int16{}
	}
	if pe, ok := producerEpoch[part][cur.id]; ok && cur.epoch < pe {
		f.EpochRegressions = append(f.EpochRegressions, fmt.Sprintf("partition %d offset %d: %s committed by producer %d epoch %d (%s) after its epoch %d",
			part, le.Offset, id, cur.id, cur.epoch, le.Source, pe))
	}
	producerEpoch[part][cur.id] = max(producerEpoch[part][cur.id], cur.epoch)
	lastWriterEpoch[part] = max(we, e.WriterEpoch)
	lastProducer[part] = cur
}

// Acked is an acknowledged write: the version and value (JSON) a writer
// answered 200 with.
type Acked struct {
	Key     string
	Version int64
	Value   json.RawMessage
}

func (a Acked) String() string { return fmt.Sprintf("%s@%d=%s", a.Key, a.Version, a.Value) }

// LostWrites returns the acknowledged writes that are not in the log with
// their version and value.
func LostWrites(acks []Acked, evs []Event) []string {
	inLog := map[string]json.RawMessage{}
	for _, le := range evs {
		inLog[fmt.Sprintf("%s@%d", le.Event.Key, le.Event.Version)] = le.Event.After
	}
	var lost []string
	for _, a := range acks {
		after, ok := inLog[fmt.Sprintf("%s@%d", a.Key, a.Version)]
		switch {
		case !ok:
			lost = append(lost, a.String()+": not in the log")
		case !jsonEqual(after, a.Value):
			lost = append(lost, fmt.Sprintf("%s: the log has %s", a, after))
		}
	}
	return lost
}

// Pause is one SIGSTOP of a writer: when it was stopped and resumed
// (wall clock, comparable with event timestamps) and the partition owners
// recorded just before each.
type Pause struct {
	Writer   string // instance id
	Proc     string
	Stopped  time.Time
	Resumed  time.Time
	Before   map[int32]projection.Owner
	After    map[int32]projection.Owner
	Complete bool // resumed, with both owner snapshots
}

// Moved returns the partitions the paused writer owned when it was stopped
// and that another writer fenced while it was stopped, with the epoch of
// that fence.
func (p Pause) Moved() map[int32]int64 {
	out := map[int32]int64{}
	for id, b := range p.Before {
		if b.ID != p.Writer {
			continue
		}
		if a, ok := p.After[id]; ok && a.ID != p.Writer && a.Epoch > b.Epoch {
			out[id] = a.Epoch
		}
	}
	return out
}

// ZombieFindings is the outcome of the zombie check.
type ZombieFindings struct {
	Pauses  int // writer pauses checked
	Moved   int // partitions fenced by another writer while their owner was stopped
	Events  []string
	Skipped int // pauses without owner snapshots (Postgres did not answer)
}

// Zombies checks every writer pause. A writer W stopped at S and
// resumed at R owned partition p at S (writer_owners); if at R another
// writer had recorded p at a higher epoch E, that writer had fenced
// kv-writer-p<p> at E while W was stopped. Anything of p decided after R
// under a writerEpoch below E was decided by an ownership older than that
// fence, that is by the zombie: no committed event of p may have ts >= R
// and writerEpoch < E. (A stopped process decides nothing, and every event W
// decided before S was committed or aborted before the new owner read the
// partition: writer.settledEnd waits for every open transaction.) Together
// with Check's epoch checks (writer epochs never go back within a
// partition, one producer commits each writer epoch) this means a resumed
// zombie got nothing committed, so nothing acknowledged: acknowledged
// writes are all in the log.
func Zombies(pauses []Pause, evs []Event) ZombieFindings {
	var z ZombieFindings
	for _, wp := range pauses {
		if !wp.Complete {
			z.Skipped++
			continue
		}
		z.Pauses++
		moved := wp.Moved()
		z.Moved += len(moved)
		for _, le := range evs {
			e, ok := moved[le.Partition]
			if !ok || le.Event.TS.Before(wp.Resumed) || le.Event.WriterEpoch >= e {
				continue
			}
			z.Events = append(z.Events, fmt.Sprintf("%s@%d at %d/%d: decided at %s by %s with epoch %d, after %s (stopped %s, resumed %s) lost partition %d to epoch %d",
				le.Event.Key, le.Event.Version, le.Partition, le.Offset, le.Event.TS.Format(time.RFC3339Nano), le.Source,
				le.Event.WriterEpoch, wp.Proc, wp.Stopped.Format(time.RFC3339Nano), wp.Resumed.Format(time.RFC3339Nano), le.Partition, e))
		}
	}
	return z
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(a, b json.RawMessage) bool {
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}
