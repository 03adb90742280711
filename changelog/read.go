package changelog

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// LastStableOffset returns the last stable offset of partition p of topic:
// every offset below it is decided (committed, aborted or a marker).
func LastStableOffset(ctx context.Context, adm *kadm.Client, topic string, p int32) (int64, error) {
	lso, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("last stable offset of %s: %w", topic, err)
	}
	o, ok := lso.Lookup(topic, p)
	if !ok {
		return 0, fmt.Errorf("last stable offset of %s/%d: partition not listed", topic, p)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("last stable offset of %s/%d: %w", topic, p, o.Err)
	}
	return o.Offset, nil
}

// ReadCommitted calls fn, in order, for every committed record of
// partition p of topic in [from, end), read with read_committed isolation.
// It stops exactly at end — also when the offsets just below end are
// aborted records, transaction markers or compacted away, which a kgo
// consumer cannot tell from "nothing yet" — so end should be a last stable
// offset. It issues Fetch requests itself and decodes them with
// kgo.ProcessFetchPartition, which reports the next offset to fetch.
func ReadCommitted(ctx context.Context, cl *kgo.Client, topic string, p int32, from, end int64, fn func(*kgo.Record) error) error {
	adm := kadm.NewClient(cl)
	pos := from
	var leader int32 = -1
	var topicID [16]byte
	for pos < end {
		if err := ctx.Err(); err != nil {
			return err
		}
		if leader < 0 {
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				return fmt.Errorf("metadata of %s: %w", topic, err)
			}
			td, ok := md.Topics[topic]
			if !ok || td.Err != nil {
				return fmt.Errorf("metadata of %s: %v", topic, td.Err)
			}
			pd, ok := td.Partitions[p]
			if !ok || pd.Leader < 0 {
				return fmt.Errorf("metadata of %s/%d: no leader", topic, p)
			}
			leader, topicID = pd.Leader, td.ID
		}
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = 250
		req.MinBytes = 1
		req.MaxBytes = 32 << 20
		req.IsolationLevel = 1
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = pos
		rp.PartitionMaxBytes = 16 << 20
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)

		resp, err := req.RequestWith(ctx, cl.Broker(int(leader)))
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			leader = -1
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return fmt.Errorf("fetch %s/%d@%d: %w", topic, p, pos, err)
		}
		var part *kmsg.FetchResponseTopicPartition
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].Partition == p {
					part = &resp.Topics[i].Partitions[j]
				}
			}
		}
		if part == nil {
			return fmt.Errorf("fetch %s/%d@%d: partition missing from the response", topic, p, pos)
		}
		if err := kerr.ErrorForCode(part.ErrorCode); err != nil {
			if kerr.IsRetriable(err) {
				leader = -1
				time.Sleep(50 * time.Millisecond)
				continue
			}
			return fmt.Errorf("fetch %s/%d@%d: %w", topic, p, pos, err)
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
		for _, r := range fp.Records {
			if r.Offset >= end {
				return nil
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if next <= pos {
			// Nothing decided yet at pos (the broker answered before the
			// last stable offset reached it); ask again.
			continue
		}
		pos = next
	}
	return nil
}
