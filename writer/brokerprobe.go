package writer

import (
	"context"
	"sync/atomic"
	"time"
)

// The brokers' probe: how often the writer asks them for their metadata,
// how long it waits for an answer, and how long after their last answer
// the writer stops being ready. A broker that stops answering (paused,
// partitioned away, its disk hung) leaves the group membership and every
// partition's state as they were until the session times out; without the
// probe /readyz would answer ready all that time while every request
// waits out its deadline.
const (
	brokerProbeEvery   = 500 * time.Millisecond
	brokerProbeTimeout = time.Second
	brokerSilence      = 1500 * time.Millisecond
)

// brokerProbe records when the brokers last answered.
type brokerProbe struct {
	// last is the time of the last answer (UnixNano); 0 until Run starts
	// probing, and then Ready does not look at it.
	last atomic.Int64
}

// answering reports whether the brokers answered within brokerSilence,
// or are not probed.
func (b *brokerProbe) answering(now time.Time) bool {
	last := b.last.Load()
	return last == 0 || now.Sub(time.Unix(0, last)) <= brokerSilence
}

// probeBrokers asks the brokers for their metadata (kgo.Client.Ping: one
// broker-only Metadata request, the next broker tried when one fails)
// every brokerProbeEvery until ctx ends, and records each answer. It logs
// when they stop and start answering again.
func (w *Writer) probeBrokers(ctx context.Context) {
	w.brokers.last.Store(time.Now().UnixNano())
	t := time.NewTicker(brokerProbeEvery)
	defer t.Stop()
	silent := false
	for {
		pctx, cancel := context.WithTimeout(ctx, brokerProbeTimeout)
		err := w.admCl.Ping(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			w.brokers.last.Store(time.Now().UnixNano())
			if silent {
				silent = false
				w.log.Info("the brokers answer again")
			}
		case !silent && !w.brokers.answering(time.Now()):
			silent = true
			w.log.Warn("the brokers do not answer: not ready", "err", err, "since", time.Unix(0, w.brokers.last.Load()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
