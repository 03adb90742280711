package audit

import (
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
	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sync/errgroup"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
)

// Group is the consumer group of the auditor. It is part of the API: its
// committed offsets say what the trail holds, and verification reads them.
const Group = "kv-auditor"

// Defaults of Config.
const (
	DefaultMaxBatch = 20000
	DefaultLinger   = 100 * time.Millisecond
	DefaultMaxTips  = 500000
)

// Config configures an Auditor.
type Config struct {
	Brokers []string
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
	if err := cfg.Alerts.fill(); err != nil {
		return nil, fmt.Errorf("auditor: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("auditor: %w", err)
	}
	return &Auditor{
		cfg: cfg, store: store, keys: keys, log: log.With("component", "auditor"), m: m,
		tips: make(map[string]tip), committed: make(map[string]map[int32]int64),
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
	opts := []kgo.Opt{
		kgo.SeedBrokers(a.cfg.Brokers...),
		kgo.WithLogger(changelog.Logger(a.log)),
		kgo.ConsumerGroup(a.cfg.Group),
		kgo.SessionTimeout(10 * time.Second),
		kgo.HeartbeatInterval(time.Second),
		kgo.ConsumeTopics(a.cfg.Topics.Changes, a.cfg.Topics.Conflicts),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		// Transaction markers advance the committed offsets too, so a
		// caught-up auditor's offsets equal the last stable offsets.
		kgo.KeepControlRecords(),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		// Partitions never committed start at the beginning, and so does
		// one whose committed offset fell out of the log (kv.conflicts
		// has time retention): re-reading is harmless, skipping is not.
		kgo.ConsumeStartOffset(kgo.NewOffset().AtStart()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.FetchMaxBytes(64 << 20),
		kgo.FetchMaxPartitionBytes(16 << 20),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			a.log.Info("partitions assigned", "partitions", assigned)
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			a.log.Info("partitions revoked", "partitions", revoked)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			a.log.Warn("partitions lost", "partitions", lost)
		}),
	}
	if a.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(a.cfg.InstanceID))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("auditor: kafka client: %w", err)
	}
	defer func() {
		a.ready.Store(false)
		cl.AllowRebalance()
		cl.Close() // leaves the group
		a.log.Info("auditor stopped")
	}()
	a.log.Info("auditor started", "brokers", a.cfg.Brokers, "topics", []string{a.cfg.Topics.Changes, a.cfg.Topics.Conflicts},
		"group", a.cfg.Group, "instance_id", a.cfg.InstanceID, "key_id", a.keys.Current.ID)

	var alerts *alerter
	if a.cfg.Alerts.Window > 0 {
		alerts = newAlerter(a.cfg.Alerts, a.store, a.log, a.m)
		actx, acancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); alerts.run(actx) }()
		defer func() { acancel(); <-done }()
	}

	a.ready.Store(true)
	for {
		recs, err := a.poll(ctx, cl)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			cl.AllowRebalance()
			continue
		}
		b, perr := a.build(ctx, recs)
		if b == nil {
			if ctx.Err() != nil {
				return nil // nothing inserted: the next run reads it again
			}
			return perr
		}
		if err := a.insert(ctx, b); err != nil {
			if ctx.Err() != nil {
				return nil // not committed: the next run inserts it again
			}
			return err
		}
		a.commit(cl, b.next)
		if perr != nil {
			return perr
		}
		cl.AllowRebalance()
	}
}

// waitTopics waits until both topics exist (the writer creates them) and
// checks the partition count of kv.changes; a mismatch is fatal at once.
func (a *Auditor) waitTopics(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := a.checkTopics(ctx)
		if err == nil || errors.Is(err, changelog.ErrPartitionCount) || ctx.Err() != nil {
			return err
		}
		a.log.Warn("topics not available yet; retrying", "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (a *Auditor) checkTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(a.cfg.Brokers...))
	if err != nil {
		return fmt.Errorf("auditor: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := changelog.Check(ctx, adm, a.cfg.Topics); err != nil {
		return fmt.Errorf("auditor: %w", err)
	}
	details, err := adm.ListTopics(ctx, a.cfg.Topics.Conflicts)
	if err != nil {
		return fmt.Errorf("auditor: describe topic %s: %w", a.cfg.Topics.Conflicts, err)
	}
	if d, ok := details[a.cfg.Topics.Conflicts]; !ok || d.Err != nil {
		return fmt.Errorf("auditor: topic %s: %v", a.cfg.Topics.Conflicts, d.Err)
	}
	return nil
}

// poll returns the next batch: it waits for records, then gathers more for
// up to Linger or until MaxBatch.
func (a *Auditor) poll(ctx context.Context, cl *kgo.Client) ([]*kgo.Record, error) {
	var recs []*kgo.Record
	var deadline time.Time
	for len(recs) < a.cfg.MaxBatch {
		pctx := ctx
		if len(recs) > 0 {
			left := time.Until(deadline)
			if left <= 0 {
				break
			}
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(ctx, left)
			defer cancel()
		}
		fetches := cl.PollRecords(pctx, a.cfg.MaxBatch-len(recs))
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return nil, ctx.Err()
		}
		if err := a.fetchErrors(fetches); err != nil {
			return nil, err
		}
		if len(recs) == 0 && fetches.NumRecords() > 0 {
			deadline = time.Now().Add(a.cfg.Linger)
		}
		recs = append(recs, fetches.Records()...)
		if pctx != ctx && pctx.Err() != nil {
			break
		}
	}
	return recs, nil
}

// fetchErrors returns an error for any fetch error that would make the
// auditor skip records. Group session errors are transient: the client
// rejoins by itself.
func (a *Auditor) fetchErrors(fetches kgo.Fetches) error {
	var errs []error
	fetches.EachError(func(topic string, part int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		if _, ok := errors.AsType[*kgo.ErrGroupSession](err); ok {
			a.log.Warn("consumer group session failed; rejoining", "err", err)
			return
		}
		a.log.Error("fetch failed; stopping", "topic", topic, "partition", part, "err", err)
		errs = append(errs, fmt.Errorf("auditor: fetch %s/%d: %w", topic, part, err))
	})
	return errors.Join(errs...)
}

// batch is what one poll becomes: rows to insert, the chain links they
// establish, and the offsets to commit once ClickHouse accepted them.
type batch struct {
	rows      []Row
	conflicts []ConflictRow
	tips      map[string]tip
	next      map[string]map[int32]int64
	records   int
}

// part is the records of one topic partition in a batch, in offset order.
type part struct {
	topic     string
	id        int32
	recs      []*kgo.Record // as polled, control records included
	next      int64         // offset to commit: past every record taken
	events    []events.Event
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
	type tp struct {
		topic string
		id    int32
	}
	parts := map[tp]*part{}
	var order []*part
	for _, r := range recs {
		p := parts[tp{r.Topic, r.Partition}]
		if p == nil {
			p = &part{topic: r.Topic, id: r.Partition}
			parts[tp{r.Topic, r.Partition}] = p
			order = append(order, p)
		}
		p.recs = append(p.recs, r)
	}
	k := a.keys.Current

	// Decode (and hash conflicts), in parallel per partition.
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for _, p := range order {
		g.Go(func() error {
			a.decode(p, k)
			return nil
		})
	}
	_ = g.Wait()

	var poison error
	for _, p := range order {
		if p.bad != nil {
			a.log.Error("record does not decode; stopping the auditor (poison pill)", "topic", p.topic, "partition", p.id, "offset", p.next, "err", p.bad)
			poison = errors.Join(poison, fmt.Errorf("auditor: poison pill at %s/%d@%d: %w", p.topic, p.id, p.next, p.bad))
		}
	}

	// Previous links neither in the cache nor earlier in the batch come
	// from ClickHouse.
	var want []KeyVersion
	for _, p := range order {
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
	var looked map[KeyVersion]string
	if len(want) > 0 {
		err := a.retry(ctx, func() (err error) {
			looked, err = a.store.ChainHashes(ctx, want)
			return err
		})
		if err != nil {
			return nil, err
		}
		a.m.lookups.Add(float64(len(want)))
	}

	// Hash and chain, in parallel per partition: a key's events are all
	// in one partition, in order.
	var starts atomic.Int64
	for _, p := range order {
		if len(p.events) == 0 {
			continue
		}
		g.Go(func() error {
			p.rows = make([]Row, len(p.events))
			p.tips = make(map[string]tip)
			for i := range p.events {
				e := &p.events[i]
				prev := ""
				if t, ok := p.tips[e.Key]; ok && t.version == e.PrevVersion {
					prev = t.chain
				} else if t, ok := a.tips[e.Key]; ok && t.version == e.PrevVersion {
					prev = t.chain
				} else if h, ok := looked[KeyVersion{e.Key, e.PrevVersion}]; ok {
					prev = h
				} else if e.PrevVersion > 0 {
					starts.Add(1)
				}
				p.rows[i] = EventRow(e, p.id, p.eventRecs[i].Offset, k, prev)
				p.tips[e.Key] = tip{e.Version, p.rows[i].ChainHash}
			}
			return nil
		})
	}
	_ = g.Wait()
	if n := starts.Load(); n > 0 {
		a.m.chainStarts.Add(float64(n))
		a.log.Info("rows start a chain: their previous versions were compacted away before the auditor read them", "rows", n)
	}

	b := &batch{next: map[string]map[int32]int64{}, tips: map[string]tip{}, records: len(recs)}
	for _, p := range order {
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

// decode decodes p's records up to the first that does not decode, and
// hashes conflicts under k.
func (a *Auditor) decode(p *part, k Key) {
	p.next = p.recs[0].Offset
	for _, r := range p.recs {
		if r.Attrs.IsControl() {
			p.next = r.Offset + 1
			continue
		}
		if p.topic == a.cfg.Topics.Conflicts {
			var c events.Conflict
			err := json.Unmarshal(r.Value, &c)
			if err == nil && (c.ID == "" || c.Key == "") {
				err = errors.New("conflict record without id or key")
			}
			if err != nil {
				p.bad = err
				return
			}
			p.conflicts = append(p.conflicts, ConflictRowOf(&c, r.Partition, r.Offset, k))
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
	backoff := 100 * time.Millisecond
	for {
		err := f()
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		a.m.retries.Inc()
		a.log.Warn("clickhouse unavailable; retrying", "retry_in", backoff, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
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

// commit commits the batch's next offsets to the group. A failure is
// logged: the rows are in ClickHouse, and a replay inserts the same rows.
func (a *Auditor) commit(cl *kgo.Client, next map[string]map[int32]int64) {
	offsets := make(map[string]map[int32]kgo.EpochOffset, len(next))
	for t, ps := range next {
		offsets[t] = make(map[int32]kgo.EpochOffset, len(ps))
		for p, o := range ps {
			offsets[t][p] = kgo.EpochOffset{Epoch: -1, Offset: o}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cerr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		cerr = err
		if err != nil {
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && cerr == nil {
					cerr = fmt.Errorf("%s/%d: error code %d", t.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	})
	if cerr != nil {
		a.log.Warn("committing offsets failed; the batch will be read again (its rows are idempotent)", "err", cerr)
		return
	}
	a.mu.Lock()
	for t, ps := range next {
		if a.committed[t] == nil {
			a.committed[t] = map[int32]int64{}
		}
		for p, o := range ps {
			a.committed[t][p] = o
			a.m.nextOffset.WithLabelValues(t, strconv.Itoa(int(p))).Set(float64(o))
		}
	}
	a.mu.Unlock()
}
