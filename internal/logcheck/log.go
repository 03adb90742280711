// Package logcheck checks what eskv promises about its log, kv.changes,
// and about the projection folded from it. It reads the log as a
// read_committed consumer and checks that, per key, versions are 1, 2, 3,
// ... each once and each event continues the previous one; that per
// partition the epochs of the writers and their producers never go back;
// that acknowledged writes are in the log (and in kv_history); that no
// writer paused past its ownership (a zombie) got anything committed; and
// that the projection's kv_entries are the fold of the log. eskvchaos runs
// every check after its fault phase, the end-to-end tests after theirs.
package logcheck

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
)

// Event is one committed event of kv.changes with its position and the
// producer (transactional id kv-writer-p<N>, at some epoch) whose
// transaction committed it.
type Event struct {
	Partition     int32
	Offset        int64
	ProducerID    int64
	ProducerEpoch int16
	Source        string // the ce_source header: eskv-writer/<instance id>
	Event         contract.Event
}

// Log is kv.changes as a read_committed consumer sees it.
type Log struct {
	Events []Event // in log order per partition, partitions in order
	// End is the last stable offset per partition (where the reading
	// stopped); Open lists partitions whose high watermark is above it (a
	// transaction still open when the log was read).
	End  map[int32]int64
	Open []int32
}

// Read reads every committed event of every partition of the changes
// topic up to its last stable offset, over a plaintext connection.
func Read(ctx context.Context, brokers []string, t changelog.Topics) (*Log, error) {
	return ReadConn(ctx, kafkaconf.Conn{}, brokers, t)
}

// ReadConn is Read over conn (TLS, SASL).
func ReadConn(ctx context.Context, conn kafkaconf.Conn, brokers []string, t changelog.Topics) (*Log, error) {
	cl, err := conn.NewClient("logcheck", brokers)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	lso, err := adm.ListCommittedOffsets(ctx, t.Changes)
	if err != nil {
		return nil, fmt.Errorf("last stable offsets: %w", err)
	}
	hw, err := adm.ListEndOffsets(ctx, t.Changes)
	if err != nil {
		return nil, fmt.Errorf("high watermarks: %w", err)
	}
	l := &Log{End: map[int32]int64{}}
	for p := range t.Partitions {
		o, ok := lso.Lookup(t.Changes, p)
		if !ok || o.Err != nil {
			return nil, fmt.Errorf("last stable offset of partition %d: %v", p, o.Err)
		}
		l.End[p] = o.Offset
		if h, ok := hw.Lookup(t.Changes, p); ok && h.Err == nil && h.Offset > o.Offset {
			l.Open = append(l.Open, p)
		}
		if err := changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: t.Changes, Partition: p, From: 0, End: o.Offset}, l.add); err != nil {
			return nil, fmt.Errorf("read partition %d: %w", p, err)
		}
	}
	return l, nil
}

func (l *Log) add(r *kgo.Record) error {
	e, err := changelog.Event(r)
	if err != nil {
		return err
	}
	le := Event{Partition: r.Partition, Offset: r.Offset, ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch, Event: e}
	for _, h := range r.Headers {
		if h.Key == "ce_source" {
			le.Source = string(h.Value)
		}
	}
	l.Events = append(l.Events, le)
	return nil
}

// LastEventEnds returns, per partition, the offset after its last
// committed event: a projection holding every event stored at least that.
func (l *Log) LastEventEnds() map[int32]int64 {
	out := map[int32]int64{}
	for _, e := range l.Events {
		out[e.Partition] = max(out[e.Partition], e.Offset+1)
	}
	return out
}
