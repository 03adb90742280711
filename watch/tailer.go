package watch

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
)

// fetchMinBytes is what a fetch of the tailers waits for, up to
// Config.FetchWait: under load, fewer and larger fetches for the broker
// and the writer, at a bounded delay.
const fetchMinBytes = 64 << 10

// tailClient returns the hub's one consumer of the partitions its
// tailers follow: a direct consumer of no partition yet (tailers add and
// remove theirs), reading read_committed.
func tailClient(cfg Config, h *Hub) (*kgo.Client, error) {
	return cfg.Kafka.NewClient("watch_tail", cfg.Brokers,
		kgo.WithLogger(changelog.Logger(h.log)),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{cfg.Topic: {}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Never jump: a position the log no longer holds ends the
		// watches (they resume with their cursors), it is not skipped.
		kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.FetchMinBytes(fetchMinBytes),
		kgo.FetchMaxWait(cfg.FetchWait),
	)
}

// poll fetches the tailers' partitions, one fetch for all of them, and
// hands each partition's records to its tailer, until ctx ends.
func (h *Hub) poll(ctx context.Context) {
	defer close(h.polled)
	for {
		fs := h.tail.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		fs.EachError(func(_ string, p int32, err error) {
			if t := h.tailerOf(p); t != nil {
				h.log.Warn("watch tailer stopped", "partition", p, "err", err)
				h.forget(t)
				h.metrics.ends.WithLabelValues(contract.EUnavailable).Inc()
				t.kill(&contract.Error{Code: contract.EUnavailable, Message: "reading the log failed; resume after the last cursor", RetryAfterSeconds: 1})
			}
		})
		fs.EachPartition(func(ftp kgo.FetchTopicPartition) {
			if t := h.tailerOf(ftp.Partition); t != nil {
				t.dispatch(ftp.Records)
			}
		})
	}
}

// tailerOf returns the tailer of partition p, if one runs.
func (h *Hub) tailerOf(p int32) *tailer {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.tailers[p]
}

// tailer follows one partition's new records for the subscriptions that
// joined it, fed by the hub's consumer.
type tailer struct {
	p    int32
	hub  *Hub
	refs int // under hub.mu: subscriptions holding it

	mu sync.Mutex
	// pos is the tailer's position: every committed record below it was
	// dispatched (or precedes the tailer's start), none at or after it.
	pos  int64
	subs map[*Sub]struct{}
	// dead is set when the tailer stopped; joins then fail.
	dead error
}

// startTailer starts following partition p at offset end; h.mu is
// held, so that adding and removing p's fetches keep their order.
func (h *Hub) startTailer(p int32, end int64) *tailer {
	t := &tailer{p: p, hub: h, pos: end, subs: map[*Sub]struct{}{}}
	h.tail.AddConsumePartitions(map[string]map[int32]kgo.Offset{h.cfg.Topic: {p: kgo.NewOffset().At(end)}})
	return t
}

// dispatch hands each record to the subscriptions that want it, never
// waiting: a subscription whose buffer is full (in events or in bytes)
// is ended slow_consumer. The subscriptions share the decoded event.
// Records below the position are skipped: a fetch of an earlier tailer
// of the partition may still arrive after it stopped.
func (t *tailer) dispatch(recs []*kgo.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range recs {
		if r.Offset < t.pos || t.dead != nil {
			continue
		}
		var ev *contract.Event
		for s := range t.subs {
			it, ok, err := s.item(r, ev)
			if err != nil {
				t.hub.log.Error("watch: undecodable record", "partition", r.Partition, "offset", r.Offset, "err", err)
				t.drop(s, &contract.Error{Code: contract.EInternal, Message: "an event of the log could not be decoded"})
				continue
			}
			if !ok {
				continue
			}
			ev = it.Event
			if !s.q.offer(queued{it: it, size: recordSize(r)}) {
				t.hub.metrics.ends.WithLabelValues(contract.ESlowConsumer).Inc()
				t.drop(s, &contract.Error{Code: contract.ESlowConsumer, Message: fmt.Sprintf(
					"the client fell %d events or %d KiB behind; resume after the cursor", s.q.maxItems, s.q.maxBytes>>10)})
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
	if t.dead != nil {
		return
	}
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

// stop ends the tailer's subscriptions (the hub stopped fetching its
// partition).
func (t *tailer) stop() {
	t.kill(&contract.Error{Code: contract.EUnavailable, Message: "the writer stopped following the partition; resume after the last cursor", RetryAfterSeconds: 1})
}
