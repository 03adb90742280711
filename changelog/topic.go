package changelog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

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
