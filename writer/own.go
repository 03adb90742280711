package writer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/writer/committer"
)

// Ownership (fence.go for the epoch): run owns a partition until its
// context ends, fencing and catching up again after any failure; a round
// that failed for another reason than fencing may resume instead.

// run owns the partition until ctx ends, re-fencing and catching up again
// after any failure: a failed transaction may or may not have committed,
// so the only safe state to continue from is the log itself.
func (p *partition) run(ctx context.Context) {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		err := p.own(ctx)
		if p.served {
			// The backoff spaces failures to become ready, not the
			// restarts of ownerships that served for a while.
			p.served = false
			backoff = 100 * time.Millisecond
		}
		if errors.Is(err, errSuperseded) {
			// Another writer owns the partition: this one was paused or
			// cut off past its session. Re-fencing now would only fence
			// the real owner; the group revokes the partition meanwhile.
			backoff = max(backoff, p.w.cfg.SessionTimeout)
		}
		p.setReady(false, 0, nil)
		p.failQueued()
		if ctx.Err() != nil {
			return
		}
		var fenced *committer.FencedError
		if errors.As(err, &fenced) {
			// The group coordinator refused this writer's membership:
			// wait until the group client learns where it stands
			// (still the owner under a new generation, or revoked).
			p.awaitGroupChange(ctx, fenced)
			if ctx.Err() != nil {
				return
			}
		}
		p.log.Warn("partition ownership interrupted; fencing and catching up again", "err", err, "backoff", backoff)
		p.w.metrics.ownershipRestarts.Inc()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// own fences older owners, catches up, and serves requests until an error
// or the end of ctx.
func (p *partition) own(ctx context.Context) error {
	cfg := p.w.cfg
	start := leaseNow()
	// The ownership epoch (fence.go): above every earlier owner's.
	epoch, err := p.fence(ctx)
	if err != nil {
		return err
	}
	// A round of ours that failed may have left records of the
	// committer's previous producer in flight: read the log end only
	// once its next producer fenced them.
	if err := p.w.committer.Await(ctx, p.failedIn); err != nil {
		return fmt.Errorf("await the shared producer: %w", err)
	}
	overlay, end, err := p.catchUp(ctx)
	if err != nil {
		return fmt.Errorf("catch up: %w", err)
	}
	if err := p.awaitLeases(ctx, start); err != nil {
		return err
	}
	p.setReady(true, int64(epoch), overlay)
	p.served = true
	p.mu.Lock()
	p.end = end
	p.mu.Unlock()
	select { // a stale signal from an earlier ownership
	case <-p.superseded:
	default:
	}
	p.w.metrics.partitionsReady.Inc()
	defer p.w.metrics.partitionsReady.Dec()
	p.log.Info("partition owned", "epoch", epoch, "overlay", len(overlay))
	if cfg.AdvertiseURL != "" {
		if err := p.w.proj.SetOwner(ctx, p.id, cfg.InstanceID, cfg.AdvertiseURL, int64(epoch)); err != nil {
			p.log.Warn("record partition ownership (other writers cannot forward here until it succeeds; tried again every second)", "err", err)
		}
	}

	return p.serve(ctx, int64(epoch))
}

// catchUp reads the partition from the projector's stored offset up to the
// last stable offset, returning the events the projection may not hold.
func (p *partition) catchUp(ctx context.Context) (map[string]overlayEntry, int64, error) {
	cfg := p.w.cfg
	stored, err := p.w.proj.Offsets(ctx, cfg.Topics.Changes)
	if err != nil {
		return nil, 0, fmt.Errorf("projector offsets: %w", err)
	}
	end, err := p.settledEnd(ctx)
	if err != nil {
		return nil, 0, err
	}
	id, err := p.w.checkTopic(ctx)
	if err != nil {
		return nil, 0, err
	}
	p.topicID = [16]byte(id.ID) // TxnOffsetCommit v6+ names the topic by its ID
	if stored[p.id] > end {
		p.log.Error("the projection is ahead of the log: the changes topic was truncated or recreated; refusing to write",
			"storedOffset", stored[p.id], "logEnd", end)
		return nil, 0, changelog.NewResetError(cfg.Topics.Changes, changelog.ReasonOffsetAfterEnd,
			fmt.Sprintf("partition %d: projection stored offset %d is past the log end %d", p.id, stored[p.id], end))
	}
	overlay := make(map[string]overlayEntry)
	limit := catchUpLimit(cfg.MaxOverlay)
	err = changelog.ReadCommitted(ctx, p.w.admCl, changelog.Range{Topic: cfg.Topics.Changes, Partition: p.id, From: stored[p.id], End: end}, func(r *kgo.Record) error {
		e, err := changelog.Event(r)
		if err != nil {
			return err
		}
		overlay[e.Key] = overlay[e.Key].next(&e, r.Offset, cfg.requestWindow())
		if len(overlay) > limit {
			return fmt.Errorf("%w: more than %d keys of partition %d changed between the projector's offset %d and offset %d (the log ends at %d); "+
				"the partition serves again once the projector is closer (twice ESKV_MAX_OVERLAY)", errProjectorBehind, limit, p.id, stored[p.id], r.Offset, end)
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return overlay, end, nil
}

// errProjectorBehind: the log holds more keys the projection does not
// hold yet than a catch-up keeps in memory (catchUpLimit).
var errProjectorBehind = errors.New("waiting for the projector")

// catchUpLimit is the most keys a catch-up holds in its overlay, for an
// overlay bounded by maxOverlay keys: twice it, room for an overlay that
// batches and transactions took past maxOverlay (submit checks the
// bound before a call, not its keys). More keys than that unprojected
// means records no writer of this configuration appended while the
// projector lagged by so much: a projection rebuilt or restored behind
// the log, or records produced around the writers. Reading them all would
// hold the whole lag in memory (gigabytes for a lag of millions of keys);
// the partition waits for the projector instead (run retries the
// ownership, backing off to 5 s).
func catchUpLimit(maxOverlay int) int { return 2 * maxOverlay }

// settledEnd waits until no transaction is open on the partition and
// returns its end. A transaction still open is an older owner's shared
// transaction (fence.go): one its writer may still commit (while the group
// has not dropped it, or before it learns so) or that its writer cannot end
// (crashed under dynamic membership, paused, cut off). Its records could
// commit later, behind our back, so the partition stays unavailable until
// it ends: committed, aborted by that writer's next producer, or aborted by
// the broker at the transaction timeout.
func (p *partition) settledEnd(ctx context.Context) (int64, error) {
	topic := p.w.cfg.Topics.Changes
	deadline := time.Now().Add(3 * p.w.cfg.TransactionTimeout)
	for {
		lso, err := changelog.LastStableOffset(ctx, p.w.admCl, topic, p.id)
		if err != nil {
			return 0, err
		}
		hw, err := p.w.adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return 0, fmt.Errorf("high watermark: %w", err)
		}
		o, ok := hw.Lookup(topic, p.id)
		if !ok || o.Err != nil {
			return 0, fmt.Errorf("high watermark of partition %d: %v", p.id, o.Err)
		}
		if lso >= o.Offset {
			return lso, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("partition %d has a transaction open by another producer (last stable offset %d < high watermark %d)", p.id, lso, o.Offset)
		}
		p.log.Warn("waiting for an open transaction on the partition to end", "lastStableOffset", lso, "highWatermark", o.Offset)
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// afterFailedRound decides what a failed round (r) of this partition
// ends: the ownership, when the error says this writer may no longer own
// the partition (a refused group fence, a fenced producer: fencedRound)
// or when resume fails; otherwise nothing (resume). Without
// Config.ResumeFailedRounds it always ends the ownership.
func (p *partition) afterFailedRound(ctx context.Context, epoch int64, r committer.Result) error {
	if !p.w.cfg.ResumeFailedRounds || fencedRound(r.Err) {
		return r.Err
	}
	if err := p.resume(ctx, epoch, r.Session); err != nil {
		return fmt.Errorf("round failed (%w); resuming failed: %w", r.Err, err)
	}
	return nil
}

// fencedRound reports whether a round's error says that this writer may
// no longer own its partitions: the group coordinator refused its
// membership, or its shared producer was fenced (another process took
// its transactional id) or refused. Those partitions start their
// ownership again (fence, catch up: run); after any other failure they
// resume.
func fencedRound(err error) bool {
	if _, ok := errors.AsType[*committer.FencedError](err); ok {
		return true
	}
	for _, e := range []error{committer.ErrStopped, kerr.ProducerFenced, kerr.InvalidProducerEpoch,
		kerr.InvalidProducerIDMapping, kerr.TransactionalIDAuthorizationFailed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// resume goes on owning the partition after a round of it failed in
// session s for another reason than fencing (a produce the brokers
// refused, a timeout): without fencing again and without reading the
// partition from the projector's offset, and without failing the
// requests queued meanwhile, which wait. The failed transaction was not
// committed by this writer, or its outcome is unknown (EndTxn sent, no
// answer): once the committer's next session began (its InitProducerID
// completed or aborted it, and fenced any produce of the failed one
// still in flight) and no transaction is open on the partition
// (settledEnd), the log from end on holds what it left: aborted records
// and markers, which a read_committed read skips, or its committed
// records. Those are this ownership's own (its epoch): they join the
// overlay as catchUp would add them. A record of any other epoch is
// another writer's: errSuperseded. Reads wait meanwhile (confirm): the
// last stable offset is past end until resume moves end.
func (p *partition) resume(ctx context.Context, epoch int64, s uint64) error {
	defer p.mark(&p.resuming)()
	p.mu.RLock()
	from := p.end
	p.mu.RUnlock()
	if err := p.w.committer.Await(ctx, s); err != nil {
		return fmt.Errorf("await the shared producer: %w", err)
	}
	end, err := p.settledEnd(ctx)
	if err != nil {
		return err
	}
	type logged struct {
		e      contract.Event
		offset int64
	}
	var found []logged
	err = changelog.ReadCommitted(ctx, p.w.admCl, changelog.Range{Topic: p.w.cfg.Topics.Changes, Partition: p.id, From: from, End: end}, func(r *kgo.Record) error {
		e, err := changelog.Event(r)
		if err != nil {
			return err
		}
		if e.WriterEpoch != epoch {
			return fmt.Errorf("%w (an event of epoch %d at offset %d; this ownership's is %d)", errSuperseded, e.WriterEpoch, r.Offset, epoch)
		}
		found = append(found, logged{e, r.Offset})
		return nil
	})
	if err != nil {
		return err
	}
	p.mu.Lock()
	if p.ready {
		for i := range found {
			e := &found[i].e
			p.advance(e, found[i].offset)
		}
		p.end = max(p.end, end)
		p.changes++
	}
	p.mu.Unlock()
	p.w.metrics.resumes.Inc()
	p.log.Info("partition resumed after a failed round", "committedAnyway", len(found), "end", end)
	return nil
}

// errSuperseded ends an ownership whose partition another writer wrote to.
var errSuperseded = errors.New("another writer appended to the partition: this writer no longer owns it")
