package projector

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
)

const rebuildAdvice = "the projection no longer matches the topic: stop every projector, " +
	"rebuild it (projector rebuild --into SCHEMA) and compare (projector diff --schema SCHEMA); never reset offsets by hand"

// reset reports a detected reset (report) and returns it.
func (p *Projector) reset(e *changelog.ResetError) error {
	p.report(e.Reason, e.Msg, e.Attrs...)
	return e
}

// reportAll reports every reset that err holds (joined or wrapped).
func (p *Projector) reportAll(err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			p.reportAll(e)
		}
	} else if e, ok := errors.AsType[*changelog.ResetError](err); ok {
		p.reset(e)
	}
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

// checkIdentity compares the topic's ID and partition count with the
// configured count and those recorded in the projection (recording them
// on first use).
func (p *Projector) checkIdentity(ctx context.Context, adm *kadm.Client) error {
	_, err := changelog.CheckIdentity(ctx, adm, p.cfg.Topic, p.cfg.Partitions, p.claim)
	if e, ok := errors.AsType[*changelog.ResetError](err); ok {
		return p.reset(e)
	}
	if err != nil {
		return fmt.Errorf("projector: %w", err)
	}
	return nil
}

// claim records the topic's identity in the projection on first use.
func (p *Projector) claim(ctx context.Context, id changelog.Identity) (changelog.Recorded, error) {
	rec, err := p.store.ClaimTopic(ctx, projection.Topic{Name: p.cfg.Topic, ID: id.ID.String(), Partitions: id.Partitions})
	return changelog.Recorded{ID: rec.ID, Partitions: rec.Partitions, Since: rec.FirstSeen}, err
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
	var (
		msgs   []string
		reason string
	)
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
		var msg string
		switch {
		case s > en.Offset:
			reason = changelog.ReasonOffsetAfterEnd
			msg = fmt.Sprintf("partition %d: stored offset %d is past the log end %d (log %d..%d): the topic was truncated or recreated",
				part, s, en.Offset, st.Offset, en.Offset)
		case s < st.Offset:
			reason = changelog.ReasonOffsetBeforeStart
			msg = fmt.Sprintf("partition %d: stored offset %d is before the log start %d (log %d..%d): records not yet applied were deleted",
				part, s, st.Offset, st.Offset, en.Offset)
		default:
			continue
		}
		p.report(reason, msg, "partition", part, "stored_offset", s, "log_start", st.Offset, "log_end", en.Offset)
		msgs = append(msgs, msg)
	}
	if len(msgs) > 0 { // each reported above
		return changelog.NewResetError(p.cfg.Topic, reason, strings.Join(msgs, "; "))
	}
	return nil
}

// watch re-checks the topic every CheckInterval while the projector
// runs, so a topic deleted, recreated, truncated or repartitioned under
// a running projector stops it even when no fetch error shows it. A
// fatal finding is passed to fail; a failed check is retried at the next
// tick.
func (p *Projector) watch(ctx context.Context, adm *kadm.Client, fail context.CancelCauseFunc) {
	t := time.NewTicker(p.cfg.CheckInterval)
	defer t.Stop()
	for ctx.Err() == nil {
		select {
		case <-t.C:
			if err := p.recheck(ctx, adm); err != nil {
				fail(err)
				return
			}
		case <-ctx.Done():
		}
	}
}

// recheck runs checkLog for watch and returns what stops the projector:
// a reset, or the topic gone. Other failures are logged.
func (p *Projector) recheck(ctx context.Context, adm *kadm.Client) error {
	err := p.checkLog(ctx, adm)
	switch {
	case err == nil || ctx.Err() != nil:
		return nil
	case changelog.Fatal(err):
		return err
	case errors.Is(err, changelog.ErrTopicMissing):
		return p.reset(changelog.NewResetError(p.cfg.Topic, changelog.ReasonMissing, "the topic was deleted under a running projector"))
	default:
		p.log.Warn("checking the changes topic failed; retrying at the next check", "err", err)
		return nil
	}
}
