package watch

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
)

// fetchMinBytes is what a tailer's fetch waits for, up to
// Config.FetchWait: under load, fewer and larger fetches for the broker
// and the writer, at a bounded delay.
const fetchMinBytes = 64 << 10

// tailer reads one partition's new records (read_committed) and fans
// them out to the subscriptions that joined it.
type tailer struct {
	p      int32
	hub    *Hub
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	refs   int // under hub.mu: subscriptions holding it

	mu sync.Mutex
	// pos is the tailer's position: every committed record below it was
	// dispatched (or precedes the tailer's start), none at or after it.
	pos  int64
	subs map[*Sub]struct{}
	// dead is set when the tailer stopped; joins then fail.
	dead error
}

// startTailer starts a tailer of partition p at offset end.
func (h *Hub) startTailer(p int32, end int64) (*tailer, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(h.cfg.Brokers...),
		kgo.WithLogger(changelog.Logger(h.log)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{h.cfg.Topic: {p: kgo.NewOffset().At(end)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Never jump: a position the log no longer holds ends the
		// watches (they resume with their cursors), it is not skipped.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMinBytes(fetchMinBytes),
		kgo.FetchMaxWait(h.cfg.FetchWait),
	)
	if err != nil {
		return nil, fmt.Errorf("watch: kafka client of partition %d: %w", p, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &tailer{p: p, hub: h, cl: cl, cancel: cancel, done: make(chan struct{}), pos: end, subs: map[*Sub]struct{}{}}
	go t.run(ctx)
	return t, nil
}

// run polls the partition until ctx ends or a fetch fails; then every
// subscription ends unavailable, with its cursor.
func (t *tailer) run(ctx context.Context) {
	defer close(t.done)
	defer t.cl.Close()
	for {
		fs := t.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.kill(&events.Error{Code: events.EUnavailable, Message: "the writer stopped following the partition; resume after the last cursor", RetryAfterSeconds: 1})
			return
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			t.hub.log.Warn("watch tailer stopped", "partition", t.p, "err", ferr)
			t.hub.forget(t)
			t.hub.metrics.ends.WithLabelValues(events.EUnavailable).Inc()
			t.kill(&events.Error{Code: events.EUnavailable, Message: "reading the log failed; resume after the last cursor", RetryAfterSeconds: 1})
			return
		}
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) { t.dispatch(ftp.Records) })
	}
}

// dispatch hands each record to the subscriptions that want it, never
// waiting: a subscription whose buffer is full is ended slow_consumer.
func (t *tailer) dispatch(recs []*kgo.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		var ev *events.Event
		for s := range t.subs {
			it, ok, err := s.item(r, ev)
			if err != nil {
				t.hub.log.Error("watch: undecodable record", "partition", r.Partition, "offset", r.Offset, "err", err)
				t.drop(s, &events.Error{Code: events.EInternal, Message: "an event of the log could not be decoded"})
				continue
			}
			if !ok {
				continue
			}
			ev = it.Event
			select {
			case s.ch <- it:
				s.last = r.Offset
			default:
				t.hub.metrics.ends.WithLabelValues(events.ESlowConsumer).Inc()
				t.drop(s, &events.Error{Code: events.ESlowConsumer, Message: fmt.Sprintf(
					"the client fell %d events behind; resume after the cursor", cap(s.ch))})
			}
		}
		t.pos = r.Offset + 1
	}
}

// drop ends s with err; t.mu is held.
func (t *tailer) drop(s *Sub, err error) {
	delete(t.subs, s)
	s.end(err)
}

// kill ends every subscription with err and refuses later joins.
func (t *tailer) kill(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dead = err
	for s := range t.subs {
		t.drop(s, err)
	}
}

// join adds s to the subscriptions when the tailer has not passed s.from
// yet and returns -1; otherwise it returns the tailer's position, up to
// which s reads the log itself first.
func (t *tailer) join(s *Sub) (int64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dead != nil {
		return 0, t.dead
	}
	if t.pos > s.from {
		return t.pos, nil
	}
	t.subs[s] = struct{}{}
	return -1, nil
}

// leave removes s (its client went away).
func (t *tailer) leave(s *Sub) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.subs, s)
}

// stop ends the tailer and waits for it.
func (t *tailer) stop() {
	t.cancel()
	<-t.done
}
