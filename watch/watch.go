// Package watch follows kv.changes for watchers (GET /v1/watch): every
// writer serves watches of any partition, not only of those it owns,
// reading committed records only (read_committed), in log order.
//
// One tailer per partition per process reads the partition's end and
// fans each record out to the subscriptions whose key or prefix it
// matches; it is started by the first watch of its partition and stopped
// after the last one leaves, so a thousand watchers cost one Kafka
// consumer per partition, not a thousand. A watch that starts from an
// older position (a cursor, a key's version) first reads the log itself
// up to the tailer's position, then joins the tailer at that position:
// nothing is skipped or delivered twice (etcd's unsynced and synced
// watcher groups, server/storage/mvcc/watchable_store.go).
//
// The tailer never waits for a subscription: each has a bounded buffer,
// and one whose buffer is full is ended with slow_consumer and the
// cursor of the last event it was given (the writer's write path and the
// other watchers are never held back by a slow client).
package watch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/internal/kafkaconf"
)

// Defaults of Config.
const (
	DefaultMaxWatches = 1000
	DefaultBuffer     = 1024
	DefaultFetchWait  = 10 * time.Millisecond
)

// Config configures a Hub.
type Config struct {
	Brokers []string
	// Kafka is how the clients reach the brokers (TLS, SASL); zero:
	// plaintext. Their metrics go to New's registry.
	Kafka      kafkaconf.Conn
	Topic      string
	Partitions int32
	// MaxWatches bounds the watches served at once; beyond it Watch
	// answers too_many_watches (default DefaultMaxWatches).
	MaxWatches int
	// Buffer is how many events a subscription holds that its client
	// has not taken yet; a full buffer ends it with slow_consumer
	// (default DefaultBuffer).
	Buffer int
	// FetchWait is how long a tailer's fetch may wait for 64 KiB of
	// records before it returns what it has (default DefaultFetchWait,
	// at least 10 ms): the delivery delay of a quiet partition, traded
	// for fewer fetches under load (docs/watch.md, figures 16 and 17).
	FetchWait time.Duration
}

// Spec says what a subscription follows.
type Spec struct {
	// Prefix selects the events whose key starts with it (bytewise), or
	// Key the events of that one key. Either lies in one scope, so in
	// one partition (events.Partition of the scope).
	Prefix, Key string
	// After, when set, starts after that cursor (exclusive); its
	// partition must be the scope's. Without it (and FromVersion) the
	// watch starts now: at the partition's last stable offset, so every
	// event committed after the call is delivered.
	After *events.Cursor
	// FromVersion, with Key, starts at that version of the key (its
	// offset in kv_history, History.VersionOffset) instead of From, and
	// drops the key's events below it.
	FromVersion int64
}

// History finds a key's version in the log: its offset, or where a watch
// from it starts when it is not projected yet (projection.Store).
type History interface {
	VersionOffset(ctx context.Context, topic string, p int32, key string, version int64) (int64, error)
}

// fromNow is the start of a watch of what comes next.
const fromNow = -1

func (s *Spec) matches(key string) bool {
	if s.Key != "" {
		return key == s.Key
	}
	return strings.HasPrefix(key, s.Prefix)
}

// Item is one delivered event and its position.
type Item struct {
	Cursor events.Cursor
	Event  *events.Event
}

// Hub serves the watches of one process.
type Hub struct {
	cfg     Config
	hist    History
	log     *slog.Logger
	cl      *kgo.Client // catch-up reads and offsets
	adm     *kadm.Client
	metrics *metrics
	// tail is the one consumer of every partition a tailer follows;
	// poll feeds the tailers until stopPoll, then closes polled.
	tail     *kgo.Client
	stopPoll context.CancelFunc
	polled   chan struct{}

	mu      sync.Mutex
	watches int
	tailers map[int32]*tailer
	closed  bool
}

// New returns a Hub; Close (or the end of Run's context) stops it.
func New(cfg Config, hist History, log *slog.Logger, reg prometheus.Registerer) (*Hub, error) {
	if cfg.MaxWatches == 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.Buffer == 0 {
		cfg.Buffer = DefaultBuffer
	}
	if cfg.FetchWait == 0 {
		cfg.FetchWait = DefaultFetchWait
	}
	if len(cfg.Brokers) == 0 || cfg.Topic == "" || cfg.Partitions < 1 {
		return nil, errors.New("watch: brokers, topic and partition count are required")
	}
	if cfg.FetchWait < 10*time.Millisecond {
		return nil, errors.New("watch: the fetch wait must be at least 10ms")
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	cfg.Kafka = cfg.Kafka.WithMetrics(reg)
	cl, err := cfg.Kafka.NewClient("watch_admin", cfg.Brokers, kgo.WithLogger(changelog.Logger(log)))
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	h := &Hub{cfg: cfg, hist: hist, log: log, cl: cl, adm: kadm.NewClient(cl), metrics: m, tailers: make(map[int32]*tailer),
		polled: make(chan struct{})}
	if h.tail, err = tailClient(cfg, h); err != nil {
		cl.Close()
		return nil, fmt.Errorf("watch: kafka consumer: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.stopPoll = cancel
	go h.poll(ctx)
	return h, nil
}

// Run returns when ctx ends, after closing the hub.
func (h *Hub) Run(ctx context.Context) error {
	<-ctx.Done()
	h.Close()
	return nil
}

// Close ends every tailer (their subscriptions end unavailable) and the
// hub's Kafka client.
func (h *Hub) Close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	ts := h.tailers
	h.tailers = map[int32]*tailer{}
	h.mu.Unlock()
	for _, t := range ts {
		t.stop()
	}
	h.stopPoll()
	<-h.polled
	h.tail.Close()
	h.cl.Close()
}

// Watches returns how many watches the hub serves.
func (h *Hub) Watches() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watches
}

// Watch starts a subscription, or answers why not: too_many_watches,
// cursor_expired (spec.From is before the log's start), invalid (a
// From beyond the log's end: a cursor of another log) or unavailable.
// The caller reads Sub.C and calls Sub.Close when done.
func (h *Hub) Watch(ctx context.Context, spec Spec) (*Sub, error) {
	scope := events.ScopeOf(spec.Prefix + spec.Key)
	p := events.Partition(scope, h.cfg.Partitions)
	from := int64(fromNow)
	if spec.After != nil {
		if spec.After.Partition != p {
			return nil, events.FieldErrorf(events.EInvalid, "after", "the cursor is of partition %d; the events of %s are in partition %d", spec.After.Partition, scope, p)
		}
		from = spec.After.Offset + 1
	}
	if err := h.admit(); err != nil {
		return nil, err
	}
	sub, err := h.start(ctx, spec, p, from)
	if err != nil {
		h.leave()
		return nil, err
	}
	return sub, nil
}

// admit takes a watch slot.
func (h *Hub) admit() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return &events.Error{Code: events.EUnavailable, Message: "the writer is stopping", RetryAfterSeconds: 1}
	}
	if h.watches >= h.cfg.MaxWatches {
		h.metrics.refused.Inc()
		return &events.Error{Code: events.ETooManyWatches, RetryAfterSeconds: 1,
			Message: fmt.Sprintf("this writer serves %d watches, its limit (ESKV_MAX_WATCHES); retry later or on another writer", h.cfg.MaxWatches)}
	}
	h.watches++
	h.metrics.watches.Set(float64(h.watches))
	return nil
}

// leave gives a watch slot back.
func (h *Hub) leave() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.watches--
	h.metrics.watches.Set(float64(h.watches))
}

// start checks spec.From against the partition's bounds and starts the
// subscription's catch-up.
func (h *Hub) start(ctx context.Context, spec Spec, p int32, from int64) (*Sub, error) {
	logStart, end, err := h.bounds(ctx, p)
	if err != nil {
		return nil, err
	}
	field := "after"
	if spec.FromVersion > 0 {
		field = "fromVersion"
		if from, err = h.hist.VersionOffset(ctx, h.cfg.Topic, p, spec.Key, spec.FromVersion); err != nil {
			return nil, err
		}
	}
	switch {
	case from == fromNow:
		from = end
	case from < logStart:
		h.metrics.ends.WithLabelValues(events.ECursorExpired).Inc()
		return nil, events.FieldErrorf(events.ECursorExpired, field,
			"the log of partition %d starts at offset %d now: the events after the cursor are gone; list the prefix again and watch from now", p, logStart)
	case from > end:
		return nil, events.FieldErrorf(events.EInvalid, field, "the cursor is beyond the end of partition %d: it is not a cursor of this log", p)
	}
	t, err := h.acquire(p, end)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Sub{hub: h, t: t, spec: spec, p: p, from: from, start: from, last: from - 1, ch: make(chan Item, h.cfg.Buffer), cancel: cancel, done: make(chan struct{})}
	s.C = s.ch
	go s.catchUp(sctx)
	return s, nil
}

// bounds returns the partition's log start and last stable offset.
func (h *Hub) bounds(ctx context.Context, p int32) (int64, int64, error) {
	unavailable := func(err error) error {
		return fmt.Errorf("%w: %w", &events.Error{Code: events.EUnavailable, Message: "the log's offsets could not be read", RetryAfterSeconds: 1}, err)
	}
	starts, err := h.adm.ListStartOffsets(ctx, h.cfg.Topic)
	if err != nil {
		return 0, 0, unavailable(err)
	}
	so, ok := starts.Lookup(h.cfg.Topic, p)
	if !ok || so.Err != nil {
		return 0, 0, unavailable(fmt.Errorf("start offset of %s/%d: %v", h.cfg.Topic, p, so.Err))
	}
	end, err := changelog.LastStableOffset(ctx, h.cl, h.cfg.Topic, p)
	if err != nil {
		return 0, 0, unavailable(err)
	}
	return so.Offset, end, nil
}

// acquire returns partition p's tailer, started at end when none runs.
func (h *Hub) acquire(p int32, end int64) (*tailer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, &events.Error{Code: events.EUnavailable, Message: "the writer is stopping", RetryAfterSeconds: 1}
	}
	t := h.tailers[p]
	if t == nil {
		t = h.startTailer(p, end)
		h.tailers[p] = t
		h.metrics.tailers.Set(float64(len(h.tailers)))
	}
	t.refs++
	return t, nil
}

// release drops a reference to t and stops it after the last one.
func (h *Hub) release(t *tailer) {
	h.mu.Lock()
	t.refs--
	last := t.refs == 0
	if last {
		h.unfollow(t)
	}
	h.mu.Unlock()
	if last {
		t.stop()
	}
}

// forget removes a tailer that stopped on an error, so that the next
// watch of its partition starts another.
func (h *Hub) forget(t *tailer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.unfollow(t)
}

// unfollow stops fetching t's partition when t is its tailer; h.mu is
// held.
func (h *Hub) unfollow(t *tailer) {
	if h.tailers[t.p] != t {
		return
	}
	delete(h.tailers, t.p)
	h.metrics.tailers.Set(float64(len(h.tailers)))
	if !h.closed {
		h.tail.RemoveConsumePartitions(map[string][]int32{h.cfg.Topic: {t.p}})
	}
}

// Sub is one watch. C delivers its events in log order; when the hub
// ends it (slow consumer, an unreadable log, the hub closing) C is
// closed and Err says why.
type Sub struct {
	C <-chan Item

	hub  *Hub
	t    *tailer
	spec Spec
	p    int32
	ch   chan Item
	// from is the first offset still to deliver: the catch-up reads from
	// it; the tailer skips records below it.
	from int64
	// last is the offset of the last event put in ch (from-1 before any).
	last   int64
	start  int64 // the first offset of the watch
	err    error
	cancel context.CancelFunc
	done   chan struct{} // closed when the catch-up returned
	once   sync.Once
}

// Err is why C was closed: an *events.Error (slow_consumer with
// Resume, cursor_expired, partition_unavailable). Only valid after C
// is closed.
func (s *Sub) Err() error { return s.err }

// Start is the cursor just before the watch's first position: resuming
// after it, before any event came, loses nothing.
func (s *Sub) Start() events.Cursor {
	return events.Cursor{Partition: s.p, Offset: s.start - 1}
}

// Resume is the cursor to resume after once C is closed: the last event
// put in C, or Start when none was (resuming after it is exact too: the
// offsets between are not the watch's). Only valid after C is closed.
func (s *Sub) Resume() events.Cursor {
	return events.Cursor{Partition: s.p, Offset: s.last}
}

// Close ends the subscription and gives its slot back.
func (s *Sub) Close() {
	s.once.Do(func() {
		s.cancel()
		<-s.done
		s.t.leave(s)
		s.hub.release(s.t)
		s.hub.leave()
	})
}

// catchUp delivers the records from s.from up to the tailer's position
// itself, then joins the tailer there.
func (s *Sub) catchUp(ctx context.Context) {
	defer close(s.done)
	h := s.hub
	for {
		pos, err := s.t.join(s)
		if err != nil {
			s.end(err)
			return
		}
		if pos < 0 {
			return // joined
		}
		err = changelog.ReadCommitted(ctx, h.cl, h.cfg.Topic, s.p, s.from, pos, func(r *kgo.Record) error {
			it, ok, err := s.item(r, nil)
			if err != nil || !ok {
				return err
			}
			select {
			case s.ch <- it:
				s.last = r.Offset
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			s.end(s.readError(ctx, err))
			return
		}
		s.from = pos
	}
}

// readError is the error a catch-up read ends the watch with.
func (s *Sub) readError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, kerr.OffsetOutOfRange):
		s.hub.metrics.ends.WithLabelValues(events.ECursorExpired).Inc()
		return events.FieldErrorf(events.ECursorExpired, "after", "the log no longer holds the events after the cursor; list the prefix again and watch from now")
	}
	s.hub.log.Warn("watch catch-up read failed", "partition", s.p, "err", err)
	s.hub.metrics.ends.WithLabelValues(events.EUnavailable).Inc()
	return &events.Error{Code: events.EUnavailable, Message: "reading the log failed; resume after the last cursor", RetryAfterSeconds: 1}
}

// end closes C with err; only the goroutine sending to ch calls it.
func (s *Sub) end(err error) {
	s.err = err
	close(s.ch)
}

// item returns r as s delivers it, and whether s wants it. ev is r
// already decoded, or nil; the decoded event is returned in the Item.
func (s *Sub) item(r *kgo.Record, ev *events.Event) (Item, bool, error) {
	if r.Offset < s.from || !s.spec.matches(events.EventKeyOf(r.Key)) {
		return Item{}, false, nil
	}
	if ev == nil {
		e, err := changelog.Event(r)
		if err != nil {
			return Item{}, false, err
		}
		ev = &e
	}
	if ev.Version < s.spec.FromVersion {
		return Item{}, false, nil
	}
	return Item{Cursor: events.Cursor{Partition: r.Partition, Offset: r.Offset}, Event: ev}, true, nil
}
