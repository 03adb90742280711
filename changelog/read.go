package changelog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LastStableOffset returns the last stable offset of partition p of topic:
// every offset below it is decided (committed, aborted or a marker).
func LastStableOffset(ctx context.Context, cl *kgo.Client, topic string, p int32) (int64, error) {
	offs, err := LastStableOffsets(ctx, cl, topic, p)
	if err != nil {
		return 0, err
	}
	return offs[p], nil
}

// LastStableOffsets returns the last stable offsets of partitions ps of
// topic in one ListOffsets request (read_committed, latest), which the
// client sends to the partitions' leaders from its cached metadata.
// kadm's ListCommittedOffsets asks for the topic's metadata first: a
// second broker round trip on every linearizable read.
func LastStableOffsets(ctx context.Context, cl *kgo.Client, topic string, ps ...int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = 1 // read_committed: the last stable offset
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range ps {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = p
		rp.CurrentLeaderEpoch = -1
		rp.Timestamp = -1 // latest
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	shards := cl.RequestSharded(ctx, req)
	offs := make(map[int32]int64, len(ps))
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, fmt.Errorf("last stable offsets of %s: %w", topic, sh.Err)
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, rp := range t.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return nil, fmt.Errorf("last stable offset of %s/%d: %w", topic, rp.Partition, err)
				}
				offs[rp.Partition] = rp.Offset
			}
		}
	}
	for _, p := range ps {
		if _, ok := offs[p]; !ok {
			return nil, fmt.Errorf("last stable offset of %s/%d: partition not listed", topic, p)
		}
	}
	return offs, nil
}

// Range is the offsets [From, End) of one partition of a topic.
type Range struct {
	Topic     string
	Partition int32
	From, End int64
}

// ReadCommitted calls fn, in order, for every committed record of the
// range rg, read with read_committed isolation.
// It stops exactly at end — also when the offsets just below end are
// aborted records, transaction markers or compacted away, which a kgo
// consumer cannot tell from "nothing yet" — so end should be a last stable
// offset. It issues Fetch requests itself and decodes them with
// kgo.ProcessFetchPartition, which reports the next offset to fetch.
func ReadCommitted(ctx context.Context, cl *kgo.Client, rg Range, fn func(*kgo.Record) error) error {
	return ReadCommittedBounded(ctx, cl, rg, 16<<20, fn)
}

// ReadCommittedBounded is ReadCommitted with fetches of at most maxBytes
// of records each (a broker still returns a whole first record batch
// larger than it): a reader that holds one fetch at a time holds about
// maxBytes of records.
func ReadCommittedBounded(ctx context.Context, cl *kgo.Client, rg Range, maxBytes int32, fn func(*kgo.Record) error) error {
	topic, p, from, end := rg.Topic, rg.Partition, rg.From, rg.End
	r := &partReader{cl: cl, adm: kadm.NewClient(cl), topic: topic, p: p, leader: -1, maxBytes: maxBytes}
	for pos := from; pos < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		var part *kmsg.FetchResponseTopicPartition
		err := readRetry.Do(ctx, func(ctx context.Context) (err error) {
			part, err = r.fetch(ctx, pos)
			return err
		})
		if err != nil {
			return err
		}
		fp, next := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
			Offset:         pos,
			IsolationLevel: kgo.ReadCommitted(),
			Topic:          topic,
			Partition:      p,
		}, part, kgo.DefaultDecompressor(), nil)
		if fp.Err != nil {
			return fmt.Errorf("fetch %s/%d@%d: %w", topic, p, pos, fp.Err)
		}
		for _, rec := range fp.Records {
			if rec.Offset >= end {
				return nil
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
		// next <= pos: nothing decided yet at pos (the broker answered
		// before the last stable offset reached it); ask again.
		pos = max(pos, next)
	}
	return nil
}

// errStaleLeader marks a fetch to retry after looking the leader up again.
var errStaleLeader = errors.New("partition leader moved or unreachable")

// readRetry retries a fetch whose leader moved, every 50 ms.
var readRetry = Retry{
	Base: 50 * time.Millisecond, Cap: 50 * time.Millisecond,
	Retriable: func(err error) bool { return errors.Is(err, errStaleLeader) },
}

// partReader fetches one partition from its leader.
type partReader struct {
	cl       *kgo.Client
	adm      *kadm.Client
	topic    string
	p        int32
	leader   int32 // -1: to look up
	topicID  [16]byte
	maxBytes int32 // of a partition's records in one fetch
}

// fetch fetches the partition at pos from its leader; an error wrapping
// errStaleLeader means the leader is to be looked up again.
func (r *partReader) fetch(ctx context.Context, pos int64) (*kmsg.FetchResponseTopicPartition, error) {
	if r.leader < 0 {
		if err := r.lookup(ctx); err != nil {
			return nil, err
		}
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 250
	req.MinBytes = 1
	req.MaxBytes = 32 << 20 // one partition: PartitionMaxBytes bounds it
	req.IsolationLevel = 1
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = r.topic, r.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = r.p
	rp.FetchOffset = pos
	rp.PartitionMaxBytes = r.maxBytes
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)

	resp, err := req.RequestWith(ctx, r.cl.Broker(int(r.leader)))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.leader = -1
		return nil, fmt.Errorf("%w: %w", errStaleLeader, err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, r.p, pos, err)
	}
	var part *kmsg.FetchResponseTopicPartition
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].Partition == r.p {
				part = &resp.Topics[i].Partitions[j]
			}
		}
	}
	if part == nil {
		return nil, fmt.Errorf("fetch %s/%d@%d: partition missing from the response", r.topic, r.p, pos)
	}
	if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
		if kerr.IsRetriable(err) {
			r.leader = -1
			return nil, fmt.Errorf("%w: %w", errStaleLeader, err)
		}
		return nil, fmt.Errorf("fetch %s/%d@%d: %w", r.topic, r.p, pos, err)
	}
	return part, nil
}

// lookup finds the partition's leader and the topic's ID.
func (r *partReader) lookup(ctx context.Context) error {
	md, err := r.adm.Metadata(ctx, r.topic)
	if err != nil {
		return fmt.Errorf("metadata of %s: %w", r.topic, err)
	}
	td, ok := md.Topics[r.topic]
	if !ok || td.Err != nil {
		return fmt.Errorf("metadata of %s: %v", r.topic, td.Err)
	}
	pd, ok := td.Partitions[r.p]
	if !ok || pd.Leader < 0 {
		return fmt.Errorf("metadata of %s/%d: no leader", r.topic, r.p)
	}
	r.leader, r.topicID = pd.Leader, td.ID
	return nil
}
