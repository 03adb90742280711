package projector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
)

// ErrTopicReset means the changes topic no longer holds the log the
// projection was folded from: it was deleted and recreated, truncated, or
// records the projection had not read yet were deleted. Going on would
// skip events or fold another log into this projection, so the projector
// stops; an operator rebuilds the projection (projector rebuild) and
// decides. It is never skipped or reset silently.
var ErrTopicReset = errors.New("the changes topic was reset, truncated or recreated")

// errTopicMissing means the changes topic does not exist (yet): at start
// the projector waits for the writer to create it; while running, it is
// a reset.
var errTopicMissing = errors.New("the changes topic does not exist")

// Reasons of a detected reset, the label of the reset metric.
const (
	reasonOffsetAfterEnd    = "offset_after_end"
	reasonOffsetBeforeStart = "offset_before_start"
	reasonRecreated         = "topic_recreated"
	reasonMissing           = "topic_missing"
	reasonPartitionCount    = "partition_count"
	reasonOutOfRange        = "offset_out_of_range"
)

var resetReasons = []string{
	reasonOffsetAfterEnd, reasonOffsetBeforeStart, reasonRecreated, reasonMissing,
	reasonPartitionCount, reasonOutOfRange,
}

const rebuildAdvice = "the projection no longer matches the topic: stop every projector, " +
	"rebuild it (projector rebuild --into SCHEMA) and compare (projector diff --schema SCHEMA); never reset offsets by hand"

// fatal reports whether err stops the projector for good.
func fatal(err error) bool {
	return errors.Is(err, ErrTopicReset) || errors.Is(err, changelog.ErrPartitionCount)
}

// reset reports a detected reset (report) and returns it as an error
// wrapping sentinel (ErrTopicReset or changelog.ErrPartitionCount).
func (p *Projector) reset(sentinel error, reason, msg string, attrs ...any) error {
	p.report(reason, msg, attrs...)
	return fmt.Errorf("%w: %s: %s", sentinel, p.cfg.Topic, msg)
}

// report counts a detected reset in the metric and logs it at ERROR.
func (p *Projector) report(reason, msg string, attrs ...any) {
	p.m.resets.WithLabelValues(reason).Inc()
	p.log.Error("changes topic reset detected; stopping: "+msg,
		append([]any{"topic", p.cfg.Topic, "reason", reason, "action", rebuildAdvice}, attrs...)...)
}

// checkLog checks that the changes topic is still the log the projection
// holds a prefix of: the same topic ID and partition count as recorded at
// the first start, and every stored offset within its partition's log.
// Errors wrapping ErrTopicReset or changelog.ErrPartitionCount are
// fatal; others (a request failed, errTopicMissing) may be retried.
func (p *Projector) checkLog(ctx context.Context, adm *kadm.Client) error {
	// Stored offsets are read before the log's offsets are listed: the
	// log end only grows, so a concurrent projector's progress can never
	// look like a stored offset past the end.
	stored, err := p.store.Offsets(ctx, p.cfg.Topic)
	if err != nil {
		return err
	}
	if err := p.checkIdentity(ctx, adm); err != nil {
		return err
	}
	return p.checkRanges(ctx, adm, stored, nil)
}

// checkIdentity compares the topic's ID and partition count with those
// recorded in the projection (recording them on first use).
func (p *Projector) checkIdentity(ctx context.Context, adm *kadm.Client) error {
	id, n, err := describeTopic(ctx, adm, p.cfg.Topic)
	if err != nil {
		return err
	}
	if n != p.cfg.Partitions {
		return p.reset(changelog.ErrPartitionCount, reasonPartitionCount,
			fmt.Sprintf("the topic has %d partitions, configured %d", n, p.cfg.Partitions),
			"partitions", n, "configured", p.cfg.Partitions)
	}
	rec, err := p.store.ClaimTopic(ctx, projection.Topic{Name: p.cfg.Topic, ID: id.String(), Partitions: n})
	if err != nil {
		return err
	}
	if rec.ID != id.String() {
		return p.reset(ErrTopicReset, reasonRecreated,
			fmt.Sprintf("the topic was recreated: its ID is %s, the projection was folded from the topic of ID %s (recorded %s)",
				id, rec.ID, rec.FirstSeen.Format(time.RFC3339)),
			"topic_id", id.String(), "recorded_topic_id", rec.ID, "recorded_at", rec.FirstSeen)
	}
	if rec.Partitions != n {
		return p.reset(changelog.ErrPartitionCount, reasonPartitionCount,
			fmt.Sprintf("the topic has %d partitions, the projection was folded from %d", n, rec.Partitions),
			"partitions", n, "recorded_partitions", rec.Partitions)
	}
	return nil
}

// checkRanges checks that each stored offset of parts (nil: every stored
// one) lies within its partition's log: at most the log end (else the
// topic was truncated or recreated) and at least the log start (else
// records not yet applied were deleted). A partition without a stored
// offset starts at the log start: nothing to check.
func (p *Projector) checkRanges(ctx context.Context, adm *kadm.Client, stored map[int32]int64, parts []int32) error {
	if parts == nil {
		for part := range stored {
			parts = append(parts, part)
		}
	}
	slices.Sort(parts)
	starts, err := adm.ListStartOffsets(ctx, p.cfg.Topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return fmt.Errorf("projector: list start offsets of %s: %w", p.cfg.Topic, err)
	}
	ends, err := adm.ListEndOffsets(ctx, p.cfg.Topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return fmt.Errorf("projector: list end offsets of %s: %w", p.cfg.Topic, err)
	}
	var msgs []string
	for _, part := range parts {
		s, ok := stored[part]
		if !ok {
			continue
		}
		st, ok1 := starts.Lookup(p.cfg.Topic, part)
		en, ok2 := ends.Lookup(p.cfg.Topic, part)
		if !ok1 || !ok2 {
			return fmt.Errorf("projector: offsets of %s/%d not listed", p.cfg.Topic, part)
		}
		var reason, msg string
		switch {
		case s > en.Offset:
			reason = reasonOffsetAfterEnd
			msg = fmt.Sprintf("partition %d: stored offset %d is past the log end %d (log %d..%d): the topic was truncated or recreated",
				part, s, en.Offset, st.Offset, en.Offset)
		case s < st.Offset:
			reason = reasonOffsetBeforeStart
			msg = fmt.Sprintf("partition %d: stored offset %d is before the log start %d (log %d..%d): records not yet applied were deleted",
				part, s, st.Offset, st.Offset, en.Offset)
		default:
			continue
		}
		p.report(reason, msg, "partition", part, "stored_offset", s, "log_start", st.Offset, "log_end", en.Offset)
		msgs = append(msgs, msg)
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrTopicReset, p.cfg.Topic, strings.Join(msgs, "; "))
	}
	return nil
}

// describeTopic returns the topic's ID and partition count, or an error
// wrapping errTopicMissing.
func describeTopic(ctx context.Context, adm *kadm.Client, topic string) (kadm.TopicID, int32, error) {
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return kadm.TopicID{}, 0, fmt.Errorf("projector: describe topic %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return kadm.TopicID{}, 0, fmt.Errorf("projector: %w: %s", errTopicMissing, topic)
	}
	if d.Err != nil {
		return kadm.TopicID{}, 0, fmt.Errorf("projector: describe topic %s: %w", topic, d.Err)
	}
	return d.ID, int32(len(d.Partitions)), nil
}

// watch re-checks the topic every CheckInterval while the projector
// runs, so a topic deleted, recreated, truncated or repartitioned under
// a running projector stops it even when no fetch error shows it. A
// fatal finding is passed to fail; a failed check is retried at the next
// tick.
func (p *Projector) watch(ctx context.Context, adm *kadm.Client, fail context.CancelCauseFunc) {
	t := time.NewTicker(p.cfg.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := p.checkLog(ctx, adm)
		switch {
		case err == nil || ctx.Err() != nil:
		case fatal(err):
			fail(err)
			return
		case errors.Is(err, errTopicMissing):
			fail(p.reset(ErrTopicReset, reasonMissing, "the topic was deleted under a running projector"))
			return
		default:
			p.log.Warn("checking the changes topic failed; retrying at the next check", "err", err)
		}
	}
}
