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
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
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
// key is RecordKey(e) (the full KV key, or for an element change the key
// and the element, so compaction keeps the latest event per key and per
// element), the value is the event JSON and the headers are CloudEvents
// attributes (ce_subject is the KV key).
func Record(e *contract.Event, topic string, p int32, source string) (*kgo.Record, error) {
	b, err := codec.MarshalEvent(e)
	if err != nil {
		return nil, fmt.Errorf("encode event %s@%d: %w", e.Key, e.Version, err)
	}
	// The headers are CloudEventHeaders (TestRecordHeaders holds
	// them to it), built here with one allocation for the record key and
	// every per-event value, and shared constants for the others: the
	// writer builds a record per write.
	rk, id := RecordKey(e), EventID(e.Key, e.Version)
	const typePrefix = "io.eskv.kv."
	buf := make([]byte, 0, len(rk)+len(id)+len(typePrefix)+len(e.Kind)+len(source)+len(e.Key)+len(time.RFC3339Nano))
	cut := func(from int) []byte { return buf[from:len(buf):len(buf)] }
	buf = append(buf, rk...)
	key := cut(0)
	n := len(buf)
	buf = append(buf, id...)
	ceID := cut(n)
	n = len(buf)
	buf = append(append(buf, typePrefix...), e.Kind...)
	ceType := cut(n)
	n = len(buf)
	buf = append(buf, source...)
	ceSource := cut(n)
	n = len(buf)
	buf = append(buf, e.Key...)
	ceSubject := cut(n)
	n = len(buf)
	buf = e.TS.UTC().AppendFormat(buf, time.RFC3339Nano)
	ceTime := cut(n)
	return &kgo.Record{Topic: topic, Partition: p, Key: key, Value: b, Headers: []kgo.RecordHeader{
		{Key: "ce_specversion", Value: ceSpecVersion},
		{Key: "ce_id", Value: ceID},
		{Key: "ce_type", Value: ceType},
		{Key: "ce_source", Value: ceSource},
		{Key: "ce_subject", Value: ceSubject},
		{Key: "ce_time", Value: ceTime},
		{Key: "ce_dataschema", Value: changeSchema},
		{Key: "content-type", Value: contentJSON},
	}}, nil
}

// The header values every change record shares; never written to.
var (
	ceSpecVersion = []byte("1.0")
	changeSchema  = []byte("https://eskv.io/schemas/events/change.v1.json")
	contentJSON   = []byte("application/json")
)

// Event decodes a kv.changes record and checks that its key matches:
// RecordKey(e), or the KV key for an element change written before
// element changes had record keys of their own (a log of an earlier
// release keeps those records as they are).
func Event(r *kgo.Record) (contract.Event, error) {
	e, _, err := EventVerbatim(r)
	return e, err
}

// EventVerbatim is Event, and also returns r.Value when it says as JSON
// what the event's encoding says (codec.UnmarshalRecord; every record
// an eskv writer appends does), else nil: a store of JSON values keeps
// it instead of encoding the event again.
func EventVerbatim(r *kgo.Record) (contract.Event, []byte, error) {
	e, verbatim, err := codec.UnmarshalRecord(r.Value)
	if err != nil {
		return contract.Event{}, nil, fmt.Errorf("%s/%d@%d: %w", r.Topic, r.Partition, r.Offset, err)
	}
	// string(r.Key) in comparisons only: a variable of it would be a copy
	// of every record's key.
	if string(r.Key) != RecordKey(&e) && (e.Element == nil || string(r.Key) != e.Key) {
		return contract.Event{}, nil, fmt.Errorf("%s/%d@%d: record key %q differs from the event's %q", r.Topic, r.Partition, r.Offset, r.Key, RecordKey(&e))
	}
	if !verbatim {
		return e, nil, nil
	}
	return e, r.Value, nil
}

func ptr(s string) *string { return &s }

// ConflictRecord returns the kv.conflicts record of a rejected CAS; its
// headers are CloudEvents attributes like a change's (source names the
// producing service).
func ConflictRecord(c *decide.Conflict, topic string, p int32, source string) (*kgo.Record, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode conflict %s: %w", c.ID, err)
	}
	hs := ConflictCloudEventHeaders(c, source)
	r := &kgo.Record{Topic: topic, Partition: p, Key: []byte(c.Key), Value: b, Headers: make([]kgo.RecordHeader, len(hs))}
	for i, h := range hs {
		r.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return r, nil
}

// ErrTopicReset means the changes topic no longer holds the log the
// projection was folded from: it was deleted and recreated, truncated, or
// records the projection had not read yet were deleted. Going on would
// skip events, or build new versions on a state the log no longer holds,
// so the projector and the writer stop; an operator rebuilds the
// projection (projector rebuild) and decides. It is never skipped or reset
// silently.
var ErrTopicReset = errors.New("the changes topic was reset, truncated or recreated")

// ErrTopicMissing means a topic does not exist (yet): at start the
// consumers wait for the writer to create it; under a running projector
// it is a reset.
var ErrTopicMissing = errors.New("the topic does not exist")

// Reasons of a reset: the Reason of a ResetError, and the label of the
// projector's reset metric.
const (
	ReasonOffsetAfterEnd    = "offset_after_end"
	ReasonOffsetBeforeStart = "offset_before_start"
	ReasonRecreated         = "topic_recreated"
	ReasonMissing           = "topic_missing"
	ReasonPartitionCount    = "partition_count"
	ReasonOutOfRange        = "offset_out_of_range"
)

// Reasons lists every reason of a reset.
var Reasons = []string{
	ReasonOffsetAfterEnd, ReasonOffsetBeforeStart, ReasonRecreated, ReasonMissing,
	ReasonPartitionCount, ReasonOutOfRange,
}

// ResetError is a reset of a topic found by a check. It wraps
// ErrPartitionCount when Reason is ReasonPartitionCount, else
// ErrTopicReset.
type ResetError struct {
	Topic  string
	Reason string
	// Msg says what was found; Attrs are its figures, as slog key-value
	// pairs.
	Msg   string
	Attrs []any
}

// NewResetError returns the reset of topic for reason.
func NewResetError(topic, reason, msg string, attrs ...any) *ResetError {
	return &ResetError{Topic: topic, Reason: reason, Msg: msg, Attrs: attrs}
}

func (e *ResetError) Error() string { return fmt.Sprintf("%v: %s: %s", e.Unwrap(), e.Topic, e.Msg) }

// Unwrap returns ErrPartitionCount or ErrTopicReset.
func (e *ResetError) Unwrap() error {
	if e.Reason == ReasonPartitionCount {
		return ErrPartitionCount
	}
	return ErrTopicReset
}

// Fatal reports whether err is a reset or a partition count mismatch:
// nothing that consumes or writes the topic may go on.
func Fatal(err error) bool {
	return errors.Is(err, ErrTopicReset) || errors.Is(err, ErrPartitionCount)
}

// Identity names one incarnation of a topic: a topic deleted and recreated
// under the same name gets another ID.
type Identity struct {
	ID         kadm.TopicID
	Partitions int32
}

// Describe returns the identity of topic, or an error wrapping
// ErrTopicMissing.
func Describe(ctx context.Context, adm *kadm.Client, topic string) (Identity, error) {
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return Identity{}, fmt.Errorf("describe topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return Identity{}, fmt.Errorf("describe topic %s: %w", topic, ErrTopicMissing)
	}
	if d.Err != nil {
		return Identity{}, fmt.Errorf("describe topic %s: %w", topic, d.Err)
	}
	return Identity{ID: d.ID, Partitions: int32(len(d.Partitions))}, nil
}

// Recorded is the identity a store recorded for the topic it was folded
// from, and when it recorded it.
type Recorded struct {
	ID         string
	Partitions int32
	Since      time.Time
}

// Claim records id as the identity of the topic a store is folded from,
// unless one is recorded already, and returns the recorded one
// (projection.Store.ClaimTopic does this in Postgres).
type Claim func(ctx context.Context, id Identity) (Recorded, error)

// CheckIdentity is the topic-identity check of the writer and the
// projector: topic must have the configured partition count and be the
// topic the store was folded from (same ID and partition count as
// recorded by claim on first use). A mismatch is a *ResetError.
func CheckIdentity(ctx context.Context, adm *kadm.Client, topic string, partitions int32, claim Claim) (Identity, error) {
	id, err := Describe(ctx, adm, topic)
	if err != nil {
		return Identity{}, err
	}
	if id.Partitions != partitions {
		return id, NewResetError(topic, ReasonPartitionCount,
			fmt.Sprintf("the topic has %d partitions, configured %d", id.Partitions, partitions),
			"partitions", id.Partitions, "configured", partitions)
	}
	rec, err := claim(ctx, id)
	if err != nil {
		return id, fmt.Errorf("claim topic %s: %w", topic, err)
	}
	if rec.ID != id.ID.String() {
		return id, NewResetError(topic, ReasonRecreated,
			fmt.Sprintf("the topic was recreated: its ID is %s, the projection was folded from the topic of ID %s (recorded %s)",
				id.ID, rec.ID, rec.Since.Format(time.RFC3339)),
			"topic_id", id.ID.String(), "recorded_topic_id", rec.ID, "recorded_at", rec.Since)
	}
	if rec.Partitions != id.Partitions {
		return id, NewResetError(topic, ReasonPartitionCount,
			fmt.Sprintf("the topic has %d partitions, the projection was folded from %d", id.Partitions, rec.Partitions),
			"partitions", id.Partitions, "recorded_partitions", rec.Partitions)
	}
	return id, nil
}
