// Package brokerprobe tells whether the brokers answer: a writer whose
// broker stops answering (paused, partitioned away, its disk hung) keeps
// its group membership and every partition's state as they were until
// the session times out; without the probe /readyz would answer ready
// all that time while every request waits out its deadline.
package brokerprobe

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// How often the probe asks the brokers for their metadata, how long it
// waits for an answer, and how long after their last answer they count
// as not answering.
const (
	probeEvery   = 500 * time.Millisecond
	probeTimeout = time.Second
	silence      = 1500 * time.Millisecond
)

// Probe records when the brokers last answered. Its zero value is a
// probe not started, which counts the brokers as answering.
type Probe struct {
	// last is the time of the last answer (UnixNano); 0 until Run starts
	// probing, and then Answering does not look at it.
	last atomic.Int64
}

// Answering reports whether the brokers answered within 1.5 s of now, or
// are not probed.
func (b *Probe) Answering(now time.Time) bool {
	last := b.last.Load()
	return last == 0 || now.Sub(time.Unix(0, last)) <= silence
}

// Run asks the brokers for their metadata (ping: kgo.Client.Ping, one
// broker-only Metadata request, the next broker tried when one fails)
// every 500 ms until ctx ends, and records each answer. It logs when they
// stop and start answering again.
func (b *Probe) Run(ctx context.Context, ping func(context.Context) error, log *slog.Logger) {
	b.last.Store(time.Now().UnixNano())
	t := time.NewTicker(probeEvery)
	defer t.Stop()
	silent := false
	for {
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := ping(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			b.last.Store(time.Now().UnixNano())
			if silent {
				silent = false
				log.Info("the brokers answer again")
			}
		case !silent && !b.Answering(time.Now()):
			silent = true
			log.Warn("the brokers do not answer: not ready", "err", err, "since", time.Unix(0, b.last.Load()))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
