package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/kafkaconf"
)

// Group is the consumer group of the auditor. It is part of the API: its
// committed offsets say what the trail holds, and verification reads them.
const Group = "kv-auditor"

// Defaults of Config.
const (
	DefaultMaxBatch = 20000
	DefaultLinger   = 500 * time.Millisecond
	DefaultMaxTips  = 500000
)

// Config configures an Auditor.
type Config struct {
	Brokers []string
	// Kafka is how the clients reach the brokers (TLS, SASL); zero:
	// plaintext. Their metrics go to New's registry.
	Kafka kafkaconf.Conn
	// Topics names kv.changes, kv.conflicts and the partition count
	// kv.changes must have.
	Topics changelog.Topics
	// Group is the consumer group; default Group.
	Group string
	// InstanceID makes the auditor a static member of the group (KIP-345):
	// restarted with the same id, it gets its partitions back at once
	// instead of after the session timeout. Unique per auditor; empty
	// means a dynamic member.
	InstanceID string
	// MaxBatch limits the records of one batch; default DefaultMaxBatch.
	MaxBatch int
	// Linger is how long a batch gathers records once the first arrived;
	// default DefaultLinger.
	Linger time.Duration
	// MaxTips bounds the cache of each key's latest chain hash; a key not
	// in it costs a ClickHouse lookup. Default DefaultMaxTips.
	MaxTips int
	// Alerts configures conflict-rate alerts; a zero Window disables them.
	Alerts AlertConfig
	// VerifyInterval is how often the auditor verifies the whole trail
	// against kv.changes (Verify; eskv_auditor_verify_* metrics); zero
	// disables it. A run reads all of kv.changes and all rows.
	VerifyInterval time.Duration
	// LagInterval is how often eskv_auditor_offset_lag is updated;
	// default changelog.DefaultLagInterval.
	LagInterval time.Duration
	// HashScheme is the hash scheme of the rows written; default
	// CurrentScheme. Only tests that make a trail of older rows set it.
	HashScheme Scheme
}

// Auditor consumes kv.changes and kv.conflicts (read_committed) into
// ClickHouse: each batch is hashed, inserted, and only then committed to
// the consumer group. A crash between insert and commit replays the batch,
// which inserts the same rows again (hashes are deterministic), and
// ReplacingMergeTree keeps one row per identity.
type Auditor struct {
	cfg   Config
	store *Store
	keys  *Keyring
	log   *slog.Logger
	m     *metrics

	// tips is each key's latest chain link seen; only Run's goroutine
	// writes it, between batches.
	tips map[string]tip

	ready     atomic.Bool
	mu        sync.Mutex
	committed map[string]map[int32]int64

	// started is when New made the auditor; lastVerify is its last
	// periodic verification (nil: none yet), under verifyMu.
	started    time.Time
	verifyMu   sync.Mutex
	lastVerify *Verification
}

type tip struct {
	version int64
	chain   string
}

// New checks cfg, fills its defaults and registers the auditor's metrics
// on reg (nil: not registered). Rows are hashed with keys.Current.
func New(cfg Config, store *Store, keys *Keyring, log *slog.Logger, reg prometheus.Registerer) (*Auditor, error) {
	if len(cfg.Brokers) == 0 {
		return nil, errors.New("auditor: no brokers configured")
	}
	if cfg.Topics.Partitions <= 0 {
		return nil, fmt.Errorf("auditor: partitions must be positive, got %d", cfg.Topics.Partitions)
	}
	if cfg.Topics.Changes == "" {
		cfg.Topics.Changes = changelog.DefaultChangesTopic
	}
	if cfg.Topics.Conflicts == "" {
		cfg.Topics.Conflicts = changelog.DefaultConflictsTopic
	}
	if keys == nil {
		return nil, errors.New("auditor: no audit key")
	}
	if cfg.Group == "" {
		cfg.Group = Group
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = DefaultMaxBatch
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.MaxTips <= 0 {
		cfg.MaxTips = DefaultMaxTips
	}
	if cfg.HashScheme == 0 {
		cfg.HashScheme = CurrentScheme
	}
	if !cfg.HashScheme.Valid() {
		return nil, fmt.Errorf("auditor: unknown hash scheme %d", cfg.HashScheme)
	}
	if err := cfg.Alerts.fill(); err != nil {
		return nil, fmt.Errorf("auditor: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.Kafka = cfg.Kafka.WithMetrics(reg)
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("auditor: %w", err)
	}
	return &Auditor{
		cfg: cfg, store: store, keys: keys, log: log.With("component", "auditor"), m: m,
		tips: make(map[string]tip), committed: make(map[string]map[int32]int64), started: time.Now().UTC(),
	}, nil
}

// Ready reports whether the auditor has joined its group and consumes.
func (a *Auditor) Ready() bool { return a.ready.Load() }

// Committed returns the next offset per topic and partition that this
// auditor has inserted and committed so far.
func (a *Auditor) Committed() map[string]map[int32]int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]map[int32]int64, len(a.committed))
	for t, ps := range a.committed {
		out[t] = maps.Clone(ps)
	}
	return out
}

// Run consumes until ctx is cancelled, then leaves the group and returns
// nil. It returns an error when it cannot go on without losing audit rows:
// the changes topic has another partition count than configured, a record
// does not decode (a poison pill: the records before it are audited and
// committed, it is not), or ClickHouse rejects a batch.
func (a *Auditor) Run(ctx context.Context) error {
	if err := a.waitTopics(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		a.log.Error("topic check failed; not starting", "err", err)
		return err
	}
	c, err := changelog.NewConsumer(changelog.ConsumerConfig{
		Brokers: a.cfg.Brokers, Kafka: a.cfg.Kafka, Role: "auditor", Topics: []string{a.cfg.Topics.Changes, a.cfg.Topics.Conflicts},
		Group: a.cfg.Group, InstanceID: a.cfg.InstanceID, MaxBatch: a.cfg.MaxBatch, Linger: a.cfg.Linger,
		// A partition whose committed offset fell out of the log
		// (kv.conflicts has time retention) starts again at the
		// beginning: re-reading is harmless, skipping is not.
		ResetToStart: true,
		Log:          a.log,
		Opts:         fetchOpts(a.cfg.Linger),
	}, sink{a})
	if err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	defer func() {
		a.ready.Store(false)
		c.Close() // leaves the group
		a.log.Info("auditor stopped")
	}()
	a.log.Info("auditor started", "brokers", a.cfg.Brokers, "topics", []string{a.cfg.Topics.Changes, a.cfg.Topics.Conflicts},
		"group", a.cfg.Group, "instance_id", a.cfg.InstanceID, "key_id", a.keys.Current.ID, "hash_scheme", int(a.cfg.HashScheme))

	stopLag, err := a.watchLag(ctx)
	if err != nil {
		return err
	}
	defer stopLag()

	if a.cfg.VerifyInterval > 0 {
		vctx, vcancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); a.verifyLoop(vctx) }()
		defer func() { vcancel(); <-done }()
	}

	if a.cfg.Alerts.Window > 0 {
		alerts := newAlerter(a.cfg.Alerts, a.store, a.log, a.m)
		actx, acancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); alerts.run(actx) }()
		defer func() { acancel(); <-done }()
	}

	a.ready.Store(true)
	return c.Run(ctx)
}

// watchLag keeps eskv_auditor_offset_lag (changelog.LagWatch) until
// stop is called, with an admin client of its own: the consumer's is
// busy, and stalled, exactly when the gauge matters.
func (a *Auditor) watchLag(ctx context.Context) (stop func(), err error) {
	cl, err := a.cfg.Kafka.NewClient("auditor_admin", a.cfg.Brokers, kgo.WithLogger(changelog.Logger(a.log)))
	if err != nil {
		return nil, fmt.Errorf("auditor: %w", err)
	}
	w := changelog.LagWatch{Admin: kadm.NewClient(cl), Group: a.cfg.Group, Topics: []string{a.cfg.Topics.Changes, a.cfg.Topics.Conflicts},
		Gauge: a.m.offsetLag, Interval: a.cfg.LagInterval, Log: a.log}
	lctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(lctx) }()
	return func() { cancel(); <-done; cl.Close() }, nil
}

// fetchMinBytes is what the broker gathers for one of the auditor's
// fetches before it answers (or Linger has passed).
const fetchMinBytes = 1 << 20

// fetchOpts are the auditor's fetch settings: large fetches, which the
// broker holds until fetchMinBytes or linger. Without them every fetch
// returns as soon as one transaction is committed, and under load the
// auditor and the broker spend their CPU on a fetch round trip per few
// records while the batch lingers anyway (issue 16: a third less of the
// auditor's CPU per write, and less than half of ClickHouse's;
// docs/performance.md).
func fetchOpts(linger time.Duration) []kgo.Opt {
	return []kgo.Opt{kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(16 << 20),
		kgo.FetchMinBytes(fetchMinBytes), kgo.FetchMaxWait(max(linger, 10*time.Millisecond))}
}

// waitTopics waits until both topics exist (the writer creates them) and
// checks the partition count of kv.changes; a mismatch is fatal at once.
func (a *Auditor) waitTopics(ctx context.Context) error {
	return changelog.Retry{
		Base: 100 * time.Millisecond, Cap: 5 * time.Second,
		Retriable: func(err error) bool {
			return !errors.Is(err, changelog.ErrPartitionCount) && !kafkaconf.Refused(err)
		},
		OnRetry: func(err error, wait time.Duration) {
			a.log.Warn("topics not available yet; retrying", "retry_in", wait, "err", err)
		},
	}.Do(ctx, a.checkTopics)
}

func (a *Auditor) checkTopics(ctx context.Context) error {
	// A client per check: without metrics, which would come and go.
	conn := a.cfg.Kafka
	conn.Metrics = nil
	cl, err := conn.NewClient("auditor_check", a.cfg.Brokers)
	if err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := changelog.Check(ctx, adm, a.cfg.Topics); err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	if _, err := changelog.Describe(ctx, adm, a.cfg.Topics.Conflicts); err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	return nil
}

// sink is the auditor as the changelog consumer's sink: each batch is
// hashed and inserted, and only then committed to the group.
type sink struct{ *Auditor }

// Assigned keeps the group's offsets: the trail holds what they say.
func (s sink) Assigned(context.Context, map[string][]int32) (map[string]map[int32]kgo.Offset, error) {
	return nil, nil
}

// Revoked does nothing: the auditor holds nothing back between batches.
func (s sink) Revoked(map[string][]int32) {}

// Write hashes, chains and inserts recs. A record that does not decode
// stops its partition there: the rest is inserted, the partition's next
// offset stays at the bad record, and Write returns it.
func (s sink) Write(ctx context.Context, recs []*kgo.Record) (changelog.Offsets, error) {
	b, poison := s.build(ctx, recs)
	if b == nil {
		return nil, poison // nothing inserted: the next run reads it again
	}
	if err := s.insert(ctx, b); err != nil {
		return nil, err // not committed: the next run inserts it again
	}
	return b.next, poison
}

// Committed records the offsets committed (Committed, the metric). A
// failure is logged: the rows are in ClickHouse, and a replay inserts the
// same rows.
func (s sink) Committed(next changelog.Offsets, err error) {
	if err != nil {
		s.log.Warn("committing offsets failed; the batch will be read again (its rows are idempotent)", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for t, ps := range next {
		if s.committed[t] == nil {
			s.committed[t] = map[int32]int64{}
		}
		for p, o := range ps {
			s.committed[t][p] = o
			s.m.nextOffset.WithLabelValues(t, strconv.Itoa(int(p))).Set(float64(o))
		}
	}
}

// batch is what one poll becomes: rows to insert, the chain links they
// establish, and the offsets to commit once ClickHouse accepted them.
type batch struct {
	rows      []Row
	conflicts []ConflictRow
	tips      map[string]tip
	next      changelog.Offsets
	records   int
}

// part is the records of one topic partition in a batch, in offset order.
type part struct {
	topic     string
	id        int32
	recs      []*kgo.Record // as polled, control records included
	next      int64         // offset to commit: past every record taken
	events    []contract.Event
	eventRecs []*kgo.Record
	conflicts []ConflictRow
	rows      []Row
	tips      map[string]tip
	bad       error // the poison pill that stopped the partition
}

// build decodes, hashes and chains recs. A record that does not decode
// stops its partition there: build returns the batch of everything else
// (the partition's next offset stays at the bad record) and the error.
func (a *Auditor) build(ctx context.Context, recs []*kgo.Record) (*batch, error) {
	parts := partsOf(recs)
	k := a.keys.Current
	// Decode (and hash conflicts), in parallel per partition.
	eachPart(parts, func(p *part) { a.decode(p, k) })
	var poison error
	for _, p := range parts {
		if p.bad != nil {
			a.log.Error("record does not decode; stopping the auditor (poison pill)", "topic", p.topic, "partition", p.id, "offset", p.next, "err", p.bad)
			poison = errors.Join(poison, fmt.Errorf("auditor: poison pill at %s/%d@%d: %w", p.topic, p.id, p.next, p.bad))
		}
	}
	looked, err := a.lookupPrev(ctx, parts)
	if err != nil {
		return nil, err
	}
	// Hash and chain, in parallel per partition: a key's events are all
	// in one partition, in order.
	var starts atomic.Int64
	eachPart(parts, func(p *part) { starts.Add(a.chain(p, looked, k)) })
	if n := starts.Load(); n > 0 {
		a.m.chainStarts.Add(float64(n))
		a.log.Info("rows start a chain: their previous versions were compacted away before the auditor read them", "rows", n)
	}

	b := &batch{next: changelog.Offsets{}, tips: map[string]tip{}, records: len(recs)}
	nrows, nconflicts := 0, 0
	for _, p := range parts {
		nrows, nconflicts = nrows+len(p.rows), nconflicts+len(p.conflicts)
	}
	b.rows, b.conflicts = make([]Row, 0, nrows), make([]ConflictRow, 0, nconflicts)
	for _, p := range parts {
		if b.next[p.topic] == nil {
			b.next[p.topic] = map[int32]int64{}
		}
		b.next[p.topic][p.id] = p.next
		b.rows = append(b.rows, p.rows...)
		b.conflicts = append(b.conflicts, p.conflicts...)
		maps.Copy(b.tips, p.tips)
	}
	return b, poison
}

// partsOf splits recs by topic partition, in the order partitions first
// appear, keeping each partition's records in order.
func partsOf(recs []*kgo.Record) []*part {
	type tp struct {
		topic string
		id    int32
	}
	byTP := map[tp]*part{}
	var order []*part
	for _, r := range recs {
		p := byTP[tp{r.Topic, r.Partition}]
		if p == nil {
			p = &part{topic: r.Topic, id: r.Partition}
			byTP[tp{r.Topic, r.Partition}] = p
			order = append(order, p)
		}
		p.recs = append(p.recs, r)
	}
	return order
}

// eachPart runs f on every part, in parallel (up to GOMAXPROCS at once).
func eachPart(parts []*part, f func(*part)) {
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, p := range parts {
		g.Go(func() error {
			f(p)
			return nil
		})
	}
	_ = g.Wait()
}

// lookupPrev fetches from ClickHouse the chain hashes of the previous
// versions that are neither in the cache nor earlier in the batch.
func (a *Auditor) lookupPrev(ctx context.Context, parts []*part) (map[KeyVersion]string, error) {
	var want []KeyVersion
	for _, p := range parts {
		last := map[string]int64{}
		for i := range p.events {
			e := &p.events[i]
			v, inBatch := last[e.Key]
			last[e.Key] = e.Version
			if e.PrevVersion == 0 || (inBatch && v == e.PrevVersion) {
				continue
			}
			if t, ok := a.tips[e.Key]; ok && t.version == e.PrevVersion {
				continue
			}
			want = append(want, KeyVersion{e.Key, e.PrevVersion})
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	var looked map[KeyVersion]string
	err := a.retry(ctx, func() (err error) {
		looked, err = a.store.ChainHashes(ctx, want)
		return err
	})
	if err != nil {
		return nil, err
	}
	a.m.lookups.Add(float64(len(want)))
	return looked, nil
}

// chain hashes p's events into rows, each linked to its key's previous
// row (from p, the cache, or looked), and returns how many rows start a
// chain because their previous version was never seen.
func (a *Auditor) chain(p *part, looked map[KeyVersion]string, k HMACKey) (starts int64) {
	if len(p.events) == 0 {
		return 0
	}
	p.rows = make([]Row, len(p.events))
	h := newHasher(k)        // one per part: parts are chained in parallel
	last := map[string]int{} // the index in p of each key's latest event
	for i := range p.events {
		e := &p.events[i]
		j, inPart := last[e.Key]
		prev := ""
		if inPart && p.events[j].Version == e.PrevVersion {
			prev = p.rows[j].ChainHash
		} else if t, ok := a.tips[e.Key]; ok && t.version == e.PrevVersion {
			prev = t.chain
		} else if c, ok := looked[KeyVersion{e.Key, e.PrevVersion}]; ok {
			prev = c
		} else if e.PrevVersion > 0 {
			starts++
		}
		// A value's hash depends on the key and the value's bytes only: a
		// key's before is mostly the after of its event before, whose hash
		// is known (one of its three HMACs, issue 16).
		before := ""
		if inPart && bytes.Equal(p.events[j].After, e.Before) {
			before = p.rows[j].AfterHash
		}
		p.rows[i] = h.eventRow(e, At{Partition: p.id, Offset: p.eventRecs[i].Offset}, a.cfg.HashScheme, prev, before)
		last[e.Key] = i
	}
	p.tips = make(map[string]tip, len(last))
	for key, i := range last {
		p.tips[key] = tip{p.events[i].Version, p.rows[i].ChainHash}
	}
	return starts
}

// decode decodes p's records up to the first that does not decode, and
// hashes conflicts under k.
func (a *Auditor) decode(p *part, k HMACKey) {
	p.next = p.recs[0].Offset
	var h *hasher // for conflicts; one per part: parts are decoded in parallel
	if p.topic != a.cfg.Topics.Conflicts {
		p.events, p.eventRecs = make([]contract.Event, 0, len(p.recs)), make([]*kgo.Record, 0, len(p.recs))
	}
	for _, r := range p.recs {
		if r.Attrs.IsControl() {
			p.next = r.Offset + 1
			continue
		}
		if p.topic == a.cfg.Topics.Conflicts {
			var c decide.Conflict
			err := json.Unmarshal(r.Value, &c)
			if err == nil && (c.ID == "" || c.Key == "") {
				err = errors.New("conflict record without id or key")
			}
			if err != nil {
				p.bad = err
				return
			}
			if h == nil {
				h = newHasher(k)
			}
			p.conflicts = append(p.conflicts, h.conflictRow(&c, At{r.Partition, r.Offset}, a.cfg.HashScheme))
		} else {
			e, err := changelog.Event(r)
			if err != nil {
				p.bad = err
				return
			}
			p.events = append(p.events, e)
			p.eventRecs = append(p.eventRecs, r)
		}
		p.next = r.Offset + 1
	}
}

// retry runs f until it succeeds, fails with an error other than
// ErrUnavailable, or ctx ends. Rebalances wait meanwhile.
func (a *Auditor) retry(ctx context.Context, f func() error) error {
	return changelog.Retry{
		Base: 100 * time.Millisecond, Cap: 5 * time.Second,
		Retriable: func(err error) bool { return errors.Is(err, ErrUnavailable) },
		OnRetry: func(err error, wait time.Duration) {
			a.m.retries.Inc()
			a.log.Warn("clickhouse unavailable; retrying", "retry_in", wait, "err", err)
		},
	}.Do(ctx, func(context.Context) error { return f() })
}

// insert stores a batch's rows; ClickHouse has accepted them all when it
// returns nil. The two tables are inserted concurrently. A shutdown (ctx
// cancelled) lets an insert under way finish, so that its offsets are
// committed too; only retries stop.
func (a *Auditor) insert(ctx context.Context, b *batch) error {
	start := time.Now()
	ictx := context.WithoutCancel(ctx)
	err := a.retry(ctx, func() error {
		var g errgroup.Group
		g.Go(func() error { return a.store.InsertEvents(ictx, b.rows, start) })
		g.Go(func() error { return a.store.InsertConflicts(ictx, b.conflicts, start) })
		return g.Wait()
	})
	if err != nil {
		if ctx.Err() == nil {
			a.log.Error("inserting a batch failed; stopping", "rows", len(b.rows), "conflicts", len(b.conflicts), "err", err)
		}
		return err
	}
	now := time.Now()
	a.m.batchSize.Observe(float64(b.records))
	a.m.insertDuration.Observe(now.Sub(start).Seconds())
	a.m.rows.WithLabelValues("audit_events").Add(float64(len(b.rows)))
	a.m.rows.WithLabelValues("audit_conflicts").Add(float64(len(b.conflicts)))
	for i := range b.rows {
		a.m.lag.Observe(now.Sub(b.rows[i].TS).Seconds())
	}
	for i := range b.conflicts {
		a.m.lag.Observe(now.Sub(b.conflicts[i].TS).Seconds())
	}
	if len(a.tips)+len(b.tips) > a.cfg.MaxTips {
		// Forget about half, at random (map order): a forgotten key costs
		// one lookup when it changes next.
		n := 0
		for k := range a.tips {
			if n%2 == 0 {
				delete(a.tips, k)
			}
			n++
		}
	}
	maps.Copy(a.tips, b.tips)
	return nil
}
