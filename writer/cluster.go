package writer

import (
	"context"
	"slices"
	"time"
)

// LogPositions is where the changes topic's log ends and where its
// consumers are, per partition, as the status page's health view shows
// them. Each source answers on its own: an error leaves its map nil.
type LogPositions struct {
	// Ends are the last stable offsets (where a read_committed consumer's
	// log ends, commit markers included), from the brokers.
	Ends    map[int32]int64
	EndsErr error
	// Projected are the projector's stored next offsets
	// (projector_offsets), from Postgres.
	Projected    map[int32]int64
	ProjectedErr error
	// Audited are the offsets the auditor's consumer group last
	// committed, from the brokers; a partition it never committed has no
	// entry.
	Audited    map[int32]int64
	AuditedErr error
}

// LogPositions reads the positions of the changes topic: its ends and
// the projector's offsets through the reads the writer already shares
// among its listings, and the committed offsets of group (the auditor's,
// kv-auditor by default; none read when group is empty).
func (w *Writer) LogPositions(ctx context.Context, group string) LogPositions {
	var lp LogPositions
	lp.Ends, lp.EndsErr = w.lso.Do(ctx)
	lp.Projected, lp.ProjectedErr = w.projected.Do(ctx)
	if group == "" {
		return lp
	}
	offs, err := w.adm.FetchOffsets(ctx, group)
	if err != nil {
		lp.AuditedErr = err
		return lp
	}
	lp.Audited = make(map[int32]int64)
	for p, o := range offs[w.cfg.Topics.Changes] {
		if o.Err == nil && o.At >= 0 {
			lp.Audited[p] = o.At
		}
	}
	return lp
}

// Partitions is the changes topic's partition count.
func (w *Writer) Partitions() int32 { return int32(w.cfg.Topics.Partitions) }

// BrokersAnswering reports whether the brokers answered the writer's
// probe within the last 1.5 s (package brokerprobe).
func (w *Writer) BrokersAnswering() bool { return w.brokers.Answering(time.Now()) }

// Owned lists the partitions this writer owns and serves (caught up),
// in order: the owners table records them only when the writer has an
// advertise URL.
func (w *Writer) Owned() []int32 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	var out []int32
	for id, p := range w.parts {
		p.mu.RLock()
		if p.ready {
			out = append(out, id)
		}
		p.mu.RUnlock()
	}
	slices.Sort(out)
	return out
}
