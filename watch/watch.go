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
// The tailer never waits for a subscription: each has a buffer bounded
// in events and in bytes, and one whose buffer is full is ended with
// slow_consumer and the cursor of the last event its client took (the
// writer's write path and the other watchers are never held back by a
// slow client). A catch-up goes at its client's pace, with one bounded
// fetch and the same buffer; and any watch whose client takes nothing
// for Config.Stall is ended slow_consumer too, its buffer dropped at
// once (queue.go). Catch-ups hold a share of Config.MemoryBytes each,
// and each principal holds at most a share of the watches and of the
// catch-up memory (limits.go).
package watch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
)

// Defaults of Config.
const (
	DefaultMaxWatches  = 1000
	DefaultBuffer      = 1024
	DefaultBufferBytes = 1 << 20
	DefaultMemoryBytes = 64 << 20
	DefaultStall       = 10 * time.Second
	DefaultFetchWait   = 10 * time.Millisecond
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
	// MaxWatchesPerPrincipal bounds the watches of one principal
	// (Spec.Principal); beyond it Watch answers too_many_requests
	// (default a tenth of MaxWatches, at least 1).
	MaxWatchesPerPrincipal int
	// Buffer is how many events a subscription holds that its client
	// has not taken yet; a full buffer ends it with slow_consumer
	// (default DefaultBuffer).
	Buffer int
	// BufferBytes bounds the same buffer in bytes (an event counts its
	// record's key and value and 512 bytes; one event larger than it is
	// taken when the buffer is empty); default DefaultBufferBytes.
	BufferBytes int64
	// MemoryBytes is the memory of the watches catching up (reading the
	// log themselves): each holds 2 × BufferBytes of it (its buffer, and
	// a fetch of BufferBytes/4 with its records), so MemoryBytes / (2 ×
	// BufferBytes) catch up at once, a principal a quarter of them (at
	// least one); default DefaultMemoryBytes, at least 2 × BufferBytes.
	MemoryBytes int64
	// Stall is how long a watch waits for its client to take an event
	// before it ends the watch slow_consumer: the bound on the time a
	// client that stopped reading holds its buffer, catching up (which
	// goes at the client's pace) or live (default DefaultStall).
	Stall time.Duration
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
	// one partition (changelog.Partition of the scope).
	Prefix, Key string
	// After, when set, starts after that cursor (exclusive); its
	// partition must be the scope's. Without it (and FromVersion) the
	// watch starts now: at the partition's last stable offset, so every
	// event committed after the call is delivered.
	After *contract.Cursor
	// FromVersion, with Key, starts at that version of the key (its
	// offset in kv_history, History.VersionOffset) instead of From, and
	// drops the key's events below it.
	FromVersion int64
	// Principal is who watches: the watch takes a slot of its share of
	// the watches and of the catch-up memory. Empty: no share is
	// counted (the hub's own callers and tests).
	Principal string
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
	Cursor contract.Cursor
	Event  *contract.Event
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

	// buffered is the bytes of the events the subscriptions' buffers
	// hold (BufferedBytes).
	buffered atomic.Int64
	// catchUps holds a token per catch-up holding its memory; its
	// capacity is MemoryBytes / catchUpBytes.
	catchUps chan struct{}

	mu      sync.Mutex
	watches int // admitted (their slots), starting included
	// starting counts the admitted watches whose position in the log is
	// not fixed yet (start): Watches leaves them out.
	starting int
	shares   map[string]*share // by principal, while it holds a slot
	tailers  map[int32]*tailer
	closed   bool
}

// withDefaults returns c with its zero fields set to their defaults, or
// why c is not valid.
func (c Config) withDefaults() (Config, error) {
	c.MaxWatches = cmp.Or(c.MaxWatches, DefaultMaxWatches)
	c.MaxWatchesPerPrincipal = cmp.Or(c.MaxWatchesPerPrincipal, max(1, c.MaxWatches/10))
	c.Buffer = cmp.Or(c.Buffer, DefaultBuffer)
	c.BufferBytes = cmp.Or(c.BufferBytes, DefaultBufferBytes)
	c.MemoryBytes = cmp.Or(c.MemoryBytes, DefaultMemoryBytes)
	c.Stall = cmp.Or(c.Stall, DefaultStall)
	c.FetchWait = cmp.Or(c.FetchWait, DefaultFetchWait)
	switch {
	case len(c.Brokers) == 0 || c.Topic == "" || c.Partitions < 1:
		return c, errors.New("watch: brokers, topic and partition count are required")
	case c.FetchWait < 10*time.Millisecond:
		return c, errors.New("watch: the fetch wait must be at least 10ms")
	case c.MaxWatches < 0 || c.MaxWatchesPerPrincipal < 0 || c.Buffer < 0 || c.Stall < 0:
		return c, errors.New("watch: the limits must be positive")
	case c.BufferBytes < minBufferBytes:
		return c, fmt.Errorf("watch: the buffer bytes must be at least %d", minBufferBytes)
	case c.MemoryBytes < c.catchUpBytes():
		return c, errors.New("watch: the catch-up memory must be at least twice the buffer bytes")
	}
	return c, nil
}

// New returns a Hub; Close (or the end of Run's context) stops it.
func New(cfg Config, hist History, log *slog.Logger, reg prometheus.Registerer) (*Hub, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Hub{cfg: cfg, hist: hist, log: log, tailers: make(map[int32]*tailer), shares: make(map[string]*share),
		catchUps: make(chan struct{}, cfg.MemoryBytes/cfg.catchUpBytes()), polled: make(chan struct{})}
	if h.metrics, err = newMetrics(reg, h.BufferedBytes); err != nil {
		return nil, err
	}
	cfg.Kafka = cfg.Kafka.WithMetrics(reg)
	cl, err := cfg.Kafka.NewClient("watch_admin", cfg.Brokers, kgo.WithLogger(changelog.Logger(log)))
	if err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	h.cl, h.adm = cl, kadm.NewClient(cl)
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

// Watches returns how many watches the hub serves: started, their
// position in the log fixed, so a watch from now counted here delivers
// every event committed from now on. A watch still reading the log's
// bounds (start) holds its slot but is not counted yet: a caller that
// waits for the count, then writes, would otherwise race the watch's
// start, whose "now" could fall after the write.
func (h *Hub) Watches() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.watches - h.starting
}

// BufferedBytes returns the bytes of the events the watches' buffers
// hold for their clients (an event shared by n watches counts n times).
func (h *Hub) BufferedBytes() int64 { return h.buffered.Load() }

// Watch starts a subscription, or answers why not: too_many_watches,
// too_many_requests (the principal's share of the watches, or no
// catch-up memory within catchUpWait), cursor_expired (spec.From is
// before the log's start), invalid (a From beyond the log's end: a
// cursor of another log) or unavailable. The caller reads Sub.C and
// calls Sub.Close when done.
func (h *Hub) Watch(ctx context.Context, spec Spec) (*Sub, error) {
	scope := contract.ScopeOf(spec.Prefix + spec.Key)
	p := changelog.Partition(scope, h.cfg.Partitions)
	from := int64(fromNow)
	if spec.After != nil {
		if spec.After.Partition != p {
			return nil, contract.FieldErrorf(contract.EInvalid, "after", "the cursor is of partition %d; the events of %s are in partition %d", spec.After.Partition, scope, p)
		}
		from = spec.After.Offset + 1
	}
	if err := h.admit(spec.Principal); err != nil {
		return nil, err
	}
	sub, err := h.start(ctx, spec, p, from)
	h.started(spec.Principal, err == nil)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// start checks spec.From against the partition's bounds and starts the
// subscription's catch-up.
func (h *Hub) start(ctx context.Context, spec Spec, p int32, from int64) (*Sub, error) {
	logStart, end, err := h.boundsPast(ctx, p, from)
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
		h.metrics.ends.WithLabelValues(contract.ECursorExpired).Inc()
		return nil, contract.FieldErrorf(contract.ECursorExpired, field,
			"the log of partition %d starts at offset %d now: the events after the cursor are gone; list the prefix again and watch after the listing's position", p, logStart)
	case from > end:
		return nil, contract.FieldErrorf(contract.EInvalid, field, "the cursor is beyond the end of partition %d: it is not a cursor of this log", p)
	}
	// A watch from the past reads the log: it gets its memory now or is
	// refused; one from now reads only what the tailer passed since
	// (catchUp waits for memory then).
	reserved := from < end
	if reserved {
		if err := h.reserve(ctx, spec.Principal); err != nil {
			return nil, err
		}
	}
	t, err := h.acquire(p, end)
	if err != nil {
		if reserved {
			h.unreserve(spec.Principal)
		}
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Sub{hub: h, t: t, spec: spec, p: p, from: from, start: from, last: from - 1, reserved: reserved,
		q: newQueue(h.cfg.Buffer, h.cfg.BufferBytes, &h.buffered), ch: make(chan Item),
		cancel: cancel, done: make(chan struct{}), pumped: make(chan struct{})}
	s.C = s.ch
	go s.pump()
	go s.catchUp(sctx)
	return s, nil
}

// bounds returns the partition's log start and last stable offset.
func (h *Hub) bounds(ctx context.Context, p int32) (int64, int64, error) {
	unavailable := func(err error) error {
		return fmt.Errorf("%w: %w", &contract.Error{Code: contract.EUnavailable, Message: "the log's offsets could not be read", RetryAfterSeconds: 1}, err)
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

// boundsPast is bounds, read again for up to about 200 ms while the last
// stable offset is below from: a read's position (a GET's, answered by
// the partition's owner as of its last commit marker) may be ahead of
// the last stable offset another client sees for an instant, while the
// brokers write the transaction's markers; a cursor of another log stays
// beyond the end and is refused after the wait.
func (h *Hub) boundsPast(ctx context.Context, p int32, from int64) (start, end int64, err error) {
	wait := 5 * time.Millisecond
	for {
		start, end, err = h.bounds(ctx, p)
		if err != nil || from <= end || wait > 100*time.Millisecond {
			return start, end, err
		}
		select {
		case <-ctx.Done():
			return start, end, nil
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// acquire returns partition p's tailer, started at end when none runs.
func (h *Hub) acquire(p int32, end int64) (*tailer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, &contract.Error{Code: contract.EUnavailable, Message: "the writer is stopping", RetryAfterSeconds: 1}
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
	// q buffers the events for C; its pump hands them over.
	q  *queue
	ch chan Item
	// from is the first offset still to deliver: the catch-up reads from
	// it; the tailer skips records below it.
	from int64
	// last is the offset of the last event C took (from-1 before any);
	// only the pump writes it.
	last  int64
	start int64 // the first offset of the watch
	// reserved: the catch-up holds its memory (Hub.reserve); only the
	// catch-up's goroutine changes it after start.
	reserved bool
	cancel   context.CancelFunc
	done     chan struct{} // closed when the catch-up returned
	pumped   chan struct{} // closed when the pump returned (and closed ch)
	once     sync.Once
}

// Err is why C was closed: an *contract.Error (slow_consumer with
// Resume, cursor_expired, partition_unavailable). Only valid after C
// is closed.
func (s *Sub) Err() error { return s.q.err }

// Start is the cursor just before the watch's first position: resuming
// after it, before any event came, loses nothing.
func (s *Sub) Start() contract.Cursor {
	return contract.Cursor{Partition: s.p, Offset: s.start - 1}
}

// Resume is the cursor to resume after once C is closed: the last event
// C delivered, or Start when none was (resuming after it is exact too:
// the offsets between are not the watch's). Only valid after C is
// closed.
func (s *Sub) Resume() contract.Cursor {
	return contract.Cursor{Partition: s.p, Offset: s.last}
}

// Pending is how many events wait behind the next one C delivers: none
// right after C delivered an event means that event may be the last for
// a while (time to flush). The event the pump offers on C is not
// counted, so a client that took the last event always sees 0, also
// before the pump noticed it was taken.
func (s *Sub) Pending() int { return s.q.pending() }

// Close ends the subscription and gives its slot back.
func (s *Sub) Close() {
	s.once.Do(func() {
		s.cancel()
		s.q.end(context.Canceled)
		<-s.done
		<-s.pumped
		s.t.leave(s)
		s.hub.release(s.t)
		s.hub.leave(s.spec.Principal)
	})
}

// pump hands the buffered events to C one at a time, then closes C
// once the queue ended. A client that takes none for Config.Stall while
// one waits is ended slow_consumer: live or catching up, a client that
// stopped reading lets go of its buffer then, not at its connection's
// write deadline.
func (s *Sub) pump() {
	defer close(s.pumped)
	defer close(s.ch)
	stall := time.NewTimer(time.Hour)
	stall.Stop()
	for {
		e, ok := s.q.next()
		if !ok {
			return
		}
		select { // an ended queue delivers nothing more, as far as it can tell
		case <-s.q.quit:
			s.q.taken(e.size)
			return
		default:
		}
		stall.Reset(s.hub.cfg.Stall)
		select {
		case s.ch <- e.it:
			stall.Stop()
			s.last = e.it.Cursor.Offset
			s.q.taken(e.size)
		case <-s.q.quit:
			s.q.taken(e.size)
			return
		case <-stall.C:
			ended := s.q.end(&contract.Error{Code: contract.ESlowConsumer, Message: fmt.Sprintf(
				"the client took no event for %s; resume after the cursor", s.hub.cfg.Stall)})
			s.q.taken(e.size)
			if ended {
				s.hub.metrics.ends.WithLabelValues(contract.ESlowConsumer).Inc()
			}
			return
		}
	}
}

// catchUp delivers the records from s.from up to the tailer's position
// itself, at its client's pace, then joins the tailer there.
func (s *Sub) catchUp(ctx context.Context) {
	defer close(s.done)
	defer s.unreserve()
	for {
		pos, err := s.t.join(s)
		if err != nil {
			s.end(err)
			return
		}
		if pos < 0 {
			return // joined
		}
		if err := s.read(ctx, pos); err != nil {
			s.end(s.readError(ctx, err))
			return
		}
		s.from = pos
	}
}

// read pushes the records of [s.from, pos) that s wants to its buffer,
// fetching BufferBytes/4 at a time, once s holds its memory.
func (s *Sub) read(ctx context.Context, pos int64) error {
	h := s.hub
	if !s.reserved {
		if err := h.reserveWait(ctx, s.spec.Principal, s.q.quit); err != nil {
			return err
		}
		s.reserved = true
	}
	return changelog.ReadCommittedBounded(ctx, h.cl, changelog.Range{Topic: h.cfg.Topic, Partition: s.p, From: s.from, End: pos}, h.cfg.fetchBytes(), func(r *kgo.Record) error {
		it, ok, err := s.item(r, nil)
		if err != nil || !ok {
			return err
		}
		return s.q.push(ctx, queued{it: it, size: recordSize(r)})
	})
}

// unreserve gives the catch-up's memory back.
func (s *Sub) unreserve() {
	if s.reserved {
		s.reserved = false
		s.hub.unreserve(s.spec.Principal)
	}
}

// readError is the error a catch-up read ends the watch with.
func (s *Sub) readError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, errEnded):
		return err // ended already: end ignores it
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, kerr.OffsetOutOfRange):
		s.hub.metrics.ends.WithLabelValues(contract.ECursorExpired).Inc()
		return contract.FieldErrorf(contract.ECursorExpired, "after", "the log no longer holds the events after the cursor; list the prefix again and watch after the listing's position")
	}
	s.hub.log.Warn("watch catch-up read failed", "partition", s.p, "err", err)
	s.hub.metrics.ends.WithLabelValues(contract.EUnavailable).Inc()
	return &contract.Error{Code: contract.EUnavailable, Message: "reading the log failed; resume after the last cursor", RetryAfterSeconds: 1}
}

// end ends s with err (the first end wins): its buffer is dropped and C
// closed once the pump let go of the event it held.
func (s *Sub) end(err error) {
	s.q.end(err)
}

// item returns r as s delivers it, and whether s wants it. ev is r
// already decoded, or nil; the decoded event is returned in the Item.
func (s *Sub) item(r *kgo.Record, ev *contract.Event) (Item, bool, error) {
	if r.Offset < s.from || !s.spec.matches(changelog.EventKeyOf(r.Key)) {
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
	return Item{Cursor: contract.Cursor{Partition: r.Partition, Offset: r.Offset}, Event: ev}, true, nil
}
