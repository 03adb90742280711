// Package changelog is the Kafka side of the event vocabulary: the topics
// kv.changes and kv.conflicts, their creation and identity checks, the
// mapping between events and Kafka records, and the one consumer loop
// (poll → sink → commit after the sink stored the records) that the
// projector and the auditor run. Writer, projector and auditor share it.
package changelog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/events"
)

// Default topic names and partition count.
const (
	DefaultChangesTopic   = "kv.changes"
	DefaultConflictsTopic = "kv.conflicts"
	DefaultPartitions     = 12
)

// Topics names the two topics and the partition count of kv.changes.
type Topics struct {
	Changes    string
	Conflicts  string
	Partitions int32
}

// ErrPartitionCount means kv.changes exists with another partition count
// than configured. Changing it would move keys between partitions and break
// ownership and per-key order, so nothing runs until an operator decides.
var ErrPartitionCount = errors.New("partition count of the changes topic differs from the configured one")

// Ensure creates the topics when missing (kv.changes compacted, kv.conflicts
// with delete policy) and checks that kv.changes has the configured
// partition count.
func Ensure(ctx context.Context, adm *kadm.Client, t Topics) error {
	changesCfg := map[string]*string{
		"cleanup.policy":        ptr("compact"),
		"min.compaction.lag.ms": ptr("60000"),
		"max.message.bytes":     ptr(strconv.Itoa(2 << 20)),
	}
	conflictsCfg := map[string]*string{
		"cleanup.policy": ptr("delete"),
		"retention.ms":   ptr(strconv.Itoa(7 * 24 * 3600 * 1000)),
	}
	for _, c := range []struct {
		name string
		cfg  map[string]*string
	}{{t.Changes, changesCfg}, {t.Conflicts, conflictsCfg}} {
		resp, err := adm.CreateTopic(ctx, t.Partitions, -1, c.cfg, c.name)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", c.name, err)
		}
		if resp.Err != nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", c.name, resp.Err)
		}
	}
	return Check(ctx, adm, t)
}

// Check verifies that kv.changes exists with the configured partition count.
func Check(ctx context.Context, adm *kadm.Client, t Topics) error {
	id, err := Describe(ctx, adm, t.Changes)
	if err != nil {
		return err
	}
	if id.Partitions != t.Partitions {
		return fmt.Errorf("%w: %s has %d partitions, configured %d", ErrPartitionCount, t.Changes, id.Partitions, t.Partitions)
	}
	return nil
}

// Record returns the Kafka record of an event for partition p: the record
// key is the full KV key (so compaction keeps the latest event per key),
// the value is the event JSON and the headers are CloudEvents attributes.
func Record(e *events.Event, topic string, p int32, source string) (*kgo.Record, error) {
	b, err := e.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode event %s@%d: %w", e.Key, e.Version, err)
	}
	hs := events.CloudEventHeaders(e, source)
	r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(e.Key), Value: b, Headers: make([]kgo.RecordHeader, len(hs))}
	for i, h := range hs {
		r.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return r, nil
}

// Event decodes a kv.changes record and checks that its key matches.
func Event(r *kgo.Record) (events.Event, error) {
	e, err := events.Unmarshal(r.Value)
	if err != nil {
		return events.Event{}, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	if string(r.Key) != e.Key {
		return events.Event{}, fmt.Errorf("%s/%d@%d: record key %q differs from event key %q", r.Topic, r.Partition, r.Offset, r.Key, e.Key)
	}
	return e, nil
}

func ptr(s string) *string { return &s }

// ConflictRecord returns the kv.conflicts record of a rejected CAS.
func ConflictRecord(c *events.Conflict, topic string, p int32) (*kgo.Record, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode conflict %s: %w", c.ID, err)
	}
	return &kgo.Record{
		Topic: topic, Partition: p, Key: []byte(c.Key), Value: b,
		Headers: []kgo.RecordHeader{
			{Key: "ce_specversion", Value: []byte("1.0")},
			{Key: "ce_id", Value: []byte(c.ID)},
			{Key: "ce_type", Value: []byte("io.eskv.kv.conflict")},
			{Key: "ce_subject", Value: []byte(c.Key)},
			{Key: "content-type", Value: []byte("application/json")},
		},
	}, nil
}
