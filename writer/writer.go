// Package writer decides and appends writes: it owns partitions of
// kv.changes through a consumer group, takes an ownership epoch per
// partition, catches up, validates compare-and-swap against an in-memory
// overlay and the Postgres projection, and commits the groups of requests
// of all its partitions in one Kafka transaction per round, fenced by the
// group (fence.go, package committer). The rules it decides by are package
// decide's: the writer plans, reads, and commits their commands.
package writer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/sweeper"
	"github.com/eskv/eskv/writer/batchbytes"
	"github.com/eskv/eskv/writer/brokerprobe"
	"github.com/eskv/eskv/writer/coalesce"
	"github.com/eskv/eskv/writer/committer"
)

// Group is the consumer group through which writers share partitions. It
// is part of the API: renaming it loses ownership history.
const Group = "kv-writer"

// Projection is what the writer reads from the Postgres projection.
type Projection interface {
	State(ctx context.Context, key string) (keystate.State, error)
	// StateAt is State and the position of partition it reflects (the
	// projector's next offset less one), read in one snapshot.
	StateAt(ctx context.Context, topic string, partition int32, key string) (keystate.State, int64, error)
	// Lookup reads the states, requestIds and set members a batch is
	// decided on that the overlay does not hold, in one round trip.
	Lookup(ctx context.Context, keys []string, refs []projection.RequestRef, elems []projection.ElementRef) (projection.Found, error)
	// LookupAt is Lookup of keys' states and the position of partition
	// they reflect, read in one snapshot.
	LookupAt(ctx context.Context, topic string, partition int32, keys []string) (projection.Found, int64, error)
	// Find is Lookup with queue reads (the first ready items of a queue,
	// items by member, dedupIds), in one round trip.
	Find(ctx context.Context, q projection.Query) (projection.Found, error)
	Element(ctx context.Context, ref projection.ElementRef) (int64, error)
	// KeysUnder lists the keys under a prefix a prefix write decides on
	// (prefixes.go).
	KeysUnder(ctx context.Context, prefix, after string, limit int, due bool, now time.Time) ([]string, error)
	Offsets(ctx context.Context, topic string) (map[int32]int64, error)
	SetOwner(ctx context.Context, p int32, id, addr string, epoch int64) error
	Owners(ctx context.Context) (map[int32]projection.Owner, error)
	ClaimTopic(ctx context.Context, t projection.Topic) (projection.Topic, error)
	// The sweeper's work lists: entries past their expiry, in-flight
	// queue items past their deadline, items past their own TTL.
	sweeper.Projection
}

// DefaultStateCacheBytes is the default Config.StateCacheBytes.
const DefaultStateCacheBytes = 64 << 20

// DefaultRoundGather is how long a round waits, at most, for the
// partitions the previous round answered (Config.RoundGather).
const DefaultRoundGather = time.Millisecond

// Config configures a Writer.
type Config struct {
	Brokers []string
	// Kafka is how the clients reach the brokers (TLS, SASL); zero:
	// plaintext. Their metrics go to New's registry.
	Kafka  kafkaconf.Conn
	Topics changelog.Topics
	// Compression is the codec of the batches produced to both topics
	// (kafkaconf.Compression); the zero codec is none.
	Compression kgo.CompressionCodec
	// CreateTopics creates missing topics at start; otherwise they must
	// exist. Either way a partition-count mismatch stops the writer.
	CreateTopics bool
	// Group is the consumer group (default Group).
	Group string
	// InstanceID is this writer's static group membership id: a restarted
	// writer with the same id takes its partitions back without waiting
	// for a session timeout. Empty means dynamic membership.
	InstanceID string
	// AdvertiseURL is the base URL other writers forward requests for this
	// writer's partitions to.
	AdvertiseURL string
	// TransactionalIDPrefix + partition is the transactional.id whose
	// epoch is a partition's ownership epoch (default "kv-writer-p";
	// fence.go). Nothing is produced under it.
	TransactionalIDPrefix string
	// SharedTransactionalIDPrefix + InstanceID (a random UUID per process
	// when InstanceID is empty) is the transactional.id of the one
	// producer whose transactions append every partition's writes
	// (default "kv-writer-"; package committer).
	SharedTransactionalIDPrefix string
	TransactionTimeout          time.Duration
	// SessionTimeout is the writer group's session timeout: a writer
	// that stops heartbeating (killed, cut off) loses its partitions
	// this long after its last heartbeat, which bounds a takeover from
	// below. 0 chooses kafkaconf.DefaultSessionTimeout, raised to the
	// brokers' group.min.session.timeout.ms (kafkaconf.ChooseSessionTimeout);
	// a value the brokers refuse stops Run with a
	// *kafkaconf.SessionTimeoutError. Heartbeats go every third of it.
	SessionTimeout time.Duration
	// MaxBatch bounds the requests decided and committed in one transaction.
	MaxBatch int
	// MaxLinger bounds how long a batch waits for as many requests as the
	// previous batch had (never when the previous batch was a single
	// request). Zero disables lingering; negative is taken as zero.
	MaxLinger time.Duration
	// RoundGather bounds how long a round waits for the partitions the
	// previous round answered to submit their next batch (package
	// committer; default 1ms). Negative disables it.
	RoundGather time.Duration
	// QueueDepth bounds the requests waiting per partition.
	QueueDepth int
	// MaxOverlay bounds the keys per partition whose latest event the
	// projection does not hold yet (default 100,000): beyond it writes
	// answer 503 until the projector catches up, instead of the writer's
	// memory growing while the projector is down.
	MaxOverlay int
	// RequestIDWindow is how many of a key's latest versions remember
	// their requestId (default DefaultRequestIDWindow; requestid.go): a
	// retry of any of them is answered as a replay (the latest) or 409
	// version_conflict (an older one) instead of being applied again. 1
	// remembers only the latest write's (unless RequestIDAge does more).
	RequestIDWindow int
	// RequestIDAge is how long a requestId is remembered after its
	// write, however many versions its key gets meanwhile (default
	// DefaultRequestIDAge; negative: only RequestIDWindow counts).
	RequestIDAge time.Duration
	// Source is the CloudEvents source of produced events.
	Source string
	// MaxListWait bounds how long a listing waits for the projector to
	// apply the writes under its prefix acknowledged before it arrived
	// (AwaitProjected); beyond it the listing answers 503 (default
	// DefaultMaxListWait).
	MaxListWait time.Duration
	// TrimInterval is how often the overlay drops what the projection holds.
	TrimInterval time.Duration
	// SweepInterval is how often the TTL sweeper looks for expired entries
	// (default 1s; negative disables the sweeper). SweepBatch bounds the
	// entries one query returns (default 5000).
	SweepInterval time.Duration
	SweepBatch    int
	// StateCacheBytes bounds the writer's state cache (statecache.go):
	// the states of keys the projector applied, kept so that reads and
	// writes of them do not read Postgres. Each partition gets
	// StateCacheBytes over the topic's partitions, so a writer owning
	// every partition (after the others failed) holds at most this much
	// and no partition's cache takes room from another's (default
	// DefaultStateCacheBytes; negative disables it).
	StateCacheBytes int64
	// QueueDedupWindow is how long a queue push's dedupId makes a
	// repeated push with it add nothing (default
	// DefaultQueueDedupWindow).
	QueueDedupWindow time.Duration
	// ReadLease is how long after a round's group fence was sent reads
	// are confirmed without waiting (lease.go), and how long a writer
	// waits after an ownership began before it serves the partition
	// (never less than DefaultReadLease, leases off included:
	// takeoverWait). Every writer of a group must use the same value, or
	// leases off on some and the default on the others (default
	// DefaultReadLease; negative disables leases, not the wait).
	ReadLease time.Duration
	// ResumeFailedRounds lets a partition whose round failed for another
	// reason than fencing resume (partition.resume) instead of fencing
	// and catching up again. Off: make chaos's twin-writer fault (two
	// processes with one instance id) produced a duplicate version with
	// it on 2026-11-29 (a queue key's version 635 twice, same epoch, in
	// consecutive transactions), so every failed round restarts its
	// partitions' ownership, as before, until resume is proven against
	// twins.
	ResumeFailedRounds bool
}

func (c *Config) setDefaults() {
	if c.Group == "" {
		c.Group = Group
	}
	if c.TransactionalIDPrefix == "" {
		c.TransactionalIDPrefix = "kv-writer-p"
	}
	if c.SharedTransactionalIDPrefix == "" {
		c.SharedTransactionalIDPrefix = "kv-writer-"
	}
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = 10 * time.Second
	}
	if c.MaxBatch == 0 {
		c.MaxBatch = 512
	}
	if c.MaxLinger == 0 {
		c.MaxLinger = 2 * time.Millisecond
	} else if c.MaxLinger < 0 {
		c.MaxLinger = 0
	}
	if c.RoundGather == 0 {
		c.RoundGather = DefaultRoundGather
	}
	if c.QueueDepth == 0 {
		c.QueueDepth = 8192
	}
	if c.MaxOverlay == 0 {
		c.MaxOverlay = 100_000
	}
	if c.RequestIDWindow <= 0 {
		c.RequestIDWindow = DefaultRequestIDWindow
	}
	if c.RequestIDAge == 0 {
		c.RequestIDAge = DefaultRequestIDAge
	} else if c.RequestIDAge < 0 {
		c.RequestIDAge = 0
	}
	if c.Source == "" {
		c.Source = "eskv-writer"
	}
	if c.MaxListWait == 0 {
		c.MaxListWait = DefaultMaxListWait
	}
	if c.TrimInterval == 0 {
		c.TrimInterval = 50 * time.Millisecond
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = time.Second
	}
	if c.QueueDedupWindow <= 0 {
		c.QueueDedupWindow = DefaultQueueDedupWindow
	}
	if c.ReadLease == 0 {
		c.ReadLease = DefaultReadLease
	}
	if c.StateCacheBytes == 0 {
		c.StateCacheBytes = DefaultStateCacheBytes
	} else if c.StateCacheBytes < 0 {
		c.StateCacheBytes = 0
	}
	if c.SweepBatch == 0 {
		c.SweepBatch = 5000
	}
}

// requestWindow is how long a requestId is remembered (requestid.go).
func (c *Config) requestWindow() decide.RequestWindow {
	return decide.RequestWindow{Versions: int64(c.RequestIDWindow), Age: c.RequestIDAge}
}

// Writer owns partitions of kv.changes and appends validated writes to them.
type Writer struct {
	cfg     Config
	proj    Projection
	log     *slog.Logger
	metrics *metrics
	adm     *kadm.Client
	admCl   *kgo.Client
	// committer commits every partition's batches (package committer).
	committer *committer.Committer
	// limits bound what a partition appends in one round (package
	// batchbytes); Run sets the topics' before any partition or the
	// committer starts.
	limits *batchbytes.Limits

	mu    sync.RWMutex
	parts map[int32]*partition
	// joined is set by each assignment of the writer group (kgo calls
	// OnPartitionsAssigned after every join, also with nothing assigned)
	// and cleared when the membership is lost.
	joined bool
	// group is the writer group's client: the second fence presents its
	// member id and generation (fence.go).
	group *kgo.Client

	// owners is the last read of the ownership table, for routing.
	owners atomic.Pointer[map[int32]projection.Owner]
	// loops are the partitions whose forwarding comes back here.
	loops loops

	// lso shares last-stable-offset requests among the concurrent reads
	// of every partition: one ListOffsets for all of them (confirm).
	lso *coalesce.Coalescer[map[int32]int64]
	// projected shares reads of the projector's stored offsets among
	// the listings waiting on any partition (AwaitProjected).
	projected *coalesce.Coalescer[map[int32]int64]
	// brokers says when the brokers last answered (package brokerprobe).
	brokers brokerprobe.Probe
	// waitsStopped: the writer is stopping; waits are not parked
	// (StopWaits).
	waitsStopped atomic.Bool
}

// New returns a Writer; Run starts it.
func New(cfg Config, proj Projection, log *slog.Logger, reg prometheus.Registerer) (*Writer, error) {
	cfg.setDefaults()
	if len(cfg.Brokers) == 0 || cfg.Topics.Changes == "" || cfg.Topics.Conflicts == "" || cfg.Topics.Partitions < 1 {
		return nil, errors.New("writer: brokers, topics and partition count are required")
	}
	cfg.Kafka = cfg.Kafka.WithMetrics(reg)
	admCl, err := cfg.Kafka.NewClient("writer_admin", cfg.Brokers, kgo.WithLogger(changelog.Logger(log)))
	if err != nil {
		return nil, fmt.Errorf("writer: %w", err)
	}
	txnID, err := cfg.sharedTxnID()
	if err != nil {
		admCl.Close()
		return nil, err
	}
	m, err := newMetrics(reg)
	if err != nil {
		admCl.Close()
		return nil, err
	}
	w := &Writer{
		cfg: cfg, proj: proj, log: log, metrics: m,
		adm: kadm.NewClient(admCl), admCl: admCl,
		parts: make(map[int32]*partition),
		loops: loops{parts: make(map[int32]projection.Owner), cameBack: make(map[int32]time.Time)},
	}
	w.committer = w.newCommitter(txnID)
	// Kafka's defaults until Run reads the topics'.
	w.limits = batchbytes.NewLimits(cfg.Topics, nil)
	w.initCoalescers()
	return w, nil
}

// newCommitter returns the committer of the shared transactional id
// txnID, fenced by this writer's group membership (groupMember), its
// producer bounded by the limits Run reads (readLimits), its leases
// on the clock of lease.go.
func (w *Writer) newCommitter(txnID string) *committer.Committer {
	cfg := w.cfg
	return committer.New(committer.Config{
		Kafka: cfg.Kafka, Brokers: cfg.Brokers, TxnID: txnID, TransactionTimeout: cfg.TransactionTimeout,
		Group: cfg.Group, Topic: cfg.Topics.Changes, Partitions: cfg.Topics.Partitions, RoundGather: cfg.RoundGather,
		ProducerLimit: func(topic string) int32 { return w.limits.ProducerLimit(topic) },
		Compression:   cfg.Compression,
		Member:        w.groupMember, Clock: leaseNow, Leases: cfg.ReadLease > 0,
		Log: w.log, Metrics: w.metrics.rounds,
	})
}

// confirmTimeout bounds one shared offset request (Writer.lso,
// Writer.projected); each read still gives up at its own context's end.
const confirmTimeout = 5 * time.Second

// initCoalescers sets up the shared offset reads: every partition of the
// changes topic in one request, so reads of several partitions arriving
// together cost one broker round trip (or one Postgres query), not one
// each.
func (w *Writer) initCoalescers() {
	all := make([]int32, w.cfg.Topics.Partitions)
	for i := range all {
		all[i] = int32(i)
	}
	w.lso = coalesce.New(func(ctx context.Context) (map[int32]int64, error) {
		return changelog.LastStableOffsets(ctx, w.admCl, w.cfg.Topics.Changes, all...)
	}, confirmTimeout)
	w.projected = coalesce.New(func(ctx context.Context) (map[int32]int64, error) {
		return w.proj.Offsets(ctx, w.cfg.Topics.Changes)
	}, confirmTimeout)
}

// sharedTxnID returns the transactional id of the writer's shared
// producer. It must never be a partition's fence id (an InstanceID "p3"
// under the default prefixes would be kv-writer-p3): InitProducerID of
// one would then abort the other's transactions and bump its epoch.
func (c *Config) sharedTxnID() (string, error) {
	instance := c.InstanceID
	if instance == "" {
		// A crashed dynamic writer's open transaction is aborted by the
		// broker's transaction timeout, not by a successor.
		instance = uuid.NewString()
	}
	id := c.SharedTransactionalIDPrefix + instance
	if rest, ok := strings.CutPrefix(id, c.TransactionalIDPrefix); ok {
		if _, err := strconv.ParseUint(rest, 10, 31); err == nil {
			return "", fmt.Errorf("writer: transactional id %q of instance %q is the fence id of partition %s; choose another instance id", id, c.InstanceID, rest)
		}
	}
	return id, nil
}

// Run joins the writer group and owns the partitions it is assigned until
// ctx ends; then it stops every partition and leaves the group.
func (w *Writer) Run(ctx context.Context) error {
	defer w.admCl.Close()
	if w.cfg.CreateTopics {
		if err := changelog.Ensure(ctx, w.adm, w.cfg.Topics); err != nil {
			return err
		}
	} else if err := changelog.Check(ctx, w.adm, w.cfg.Topics); err != nil {
		return err
	}
	if _, err := w.checkTopic(ctx); err != nil {
		return err
	}
	w.limits = w.readLimits(ctx)
	if err := w.chooseSessionTimeout(ctx); err != nil {
		return err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	opts := []kgo.Opt{
		kgo.ConsumerGroup(w.cfg.Group),
		kgo.ConsumeTopics(w.cfg.Topics.Changes),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(w.cfg.SessionTimeout),
		// Room for a revoke to wait for a round in flight (revoke), as
		// when the session was a fixed 10 s.
		kgo.RebalanceTimeout(max(w.cfg.SessionTimeout, w.cfg.TransactionTimeout)),
		kgo.HeartbeatInterval(kafkaconf.HeartbeatInterval(w.cfg.SessionTimeout)),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, cl *kgo.Client, m map[string][]int32) {
			w.assign(runCtx, cl, m[w.cfg.Topics.Changes])
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.revoke(m[w.cfg.Topics.Changes])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.lose(m[w.cfg.Topics.Changes])
		}),
		kgo.WithLogger(changelog.Logger(w.log)),
	}
	if w.cfg.InstanceID != "" {
		opts = append(opts, kgo.InstanceID(w.cfg.InstanceID))
	}
	group, err := w.cfg.Kafka.NewClient("writer_group", w.cfg.Brokers, opts...)
	if err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	// The group only assigns ownership; catch-up reads with its own
	// consumer, so the group client never fetches.
	group.PauseFetchTopics(w.cfg.Topics.Changes)
	commitCtx, stopCommitter := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCommitter()
	go w.committer.Run(commitCtx)

	t := time.NewTicker(w.cfg.TrimInterval)
	defer t.Stop()
	ot := time.NewTicker(time.Second)
	defer ot.Stop()
	w.refreshOwners(ctx)
	go w.sweep(runCtx)
	go w.brokers.Run(runCtx, w.admCl.Ping, w.log)
	for {
		select {
		case <-ctx.Done():
			w.log.Info("writer stopping: leaving the group")
			group.Close() // revokes every partition first
			w.revoke(w.owned())
			// The committer stops after the partitions: none has a
			// round under way any more.
			stopCommitter()
			<-w.committer.Done()
			return nil
		case <-t.C:
			w.trim(ctx)
		case <-ot.C:
			w.refreshOwners(ctx)
		}
	}
}

// chooseSessionTimeout sets cfg.SessionTimeout to the session timeout the
// writer joins its group with (Config.SessionTimeout), before any
// partition reads it.
func (w *Writer) chooseSessionTimeout(ctx context.Context) error {
	b, err := kafkaconf.ReadSessionBounds(ctx, w.adm)
	if err != nil {
		w.log.Warn("reading the brokers' group session timeout bounds failed: assuming Kafka's defaults",
			"err", err, "min", b.Min, "max", b.Max)
	}
	s, err := kafkaconf.ChooseSessionTimeout(w.cfg.SessionTimeout, b)
	if err != nil {
		return fmt.Errorf("writer: %w", err)
	}
	w.cfg.SessionTimeout = s
	w.log.Info("group session", "sessionTimeout", s, "heartbeatInterval", kafkaconf.HeartbeatInterval(s),
		"brokerMinSessionTimeout", b.Min, "brokerBoundsKnown", b.Known)
	return nil
}

// readLimits reads the topics' max.message.bytes (package batchbytes); when
// the brokers do not tell, it assumes Kafka's default, the smallest a
// cluster is likely to have.
func (w *Writer) readLimits(ctx context.Context) *batchbytes.Limits {
	t := w.cfg.Topics
	maxMessage, err := changelog.MaxMessageBytes(ctx, w.adm, t.Changes, t.Conflicts)
	if err != nil {
		w.log.Warn("reading the topics' max.message.bytes failed: assuming Kafka's default",
			"err", err, "maxMessageBytes", changelog.DefaultMaxMessageBytes)
	}
	l := batchbytes.NewLimits(t, maxMessage)
	w.log.Info("batch limits", "topic", t.Changes, "maxMessageBytes", maxMessage[t.Changes], "budgetBytes", l.Budget(t.Changes),
		"conflictsTopic", t.Conflicts, "conflictsMaxMessageBytes", maxMessage[t.Conflicts], "conflictsBudgetBytes", l.Budget(t.Conflicts))
	return l
}

func (w *Writer) assign(ctx context.Context, group *kgo.Client, ps []int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.joined, w.group = true, group
	for _, id := range ps {
		if _, ok := w.parts[id]; ok {
			continue
		}
		p := newPartition(w, id)
		pctx, cancel := context.WithCancel(ctx)
		p.cancel = cancel
		w.parts[id] = p
		go p.run(pctx)
	}
	w.log.Info("partitions assigned", "partitions", ps)
}

// lose ends the writer's membership of the group (a fatal group error:
// its session expired, or another process took its instance id): it is
// not ready and the second fence refuses every commit until the next
// assignment, and the partitions stop.
func (w *Writer) lose(ps []int32) {
	w.mu.Lock()
	w.joined = false
	w.mu.Unlock()
	w.revoke(ps)
}

// revoke stops the partitions and waits until they stopped appending: the
// group hands them to another writer only after this returns.
func (w *Writer) revoke(ps []int32) {
	w.mu.Lock()
	var stopping []*partition
	for _, id := range ps {
		if p, ok := w.parts[id]; ok {
			delete(w.parts, id)
			p.cancel()
			stopping = append(stopping, p)
		}
	}
	w.mu.Unlock()
	for _, p := range stopping {
		<-p.done
		p.failQueued()
	}
	if len(stopping) > 0 {
		w.log.Info("partitions revoked", "partitions", ps)
	}
}

func (w *Writer) owned() []int32 {
	w.mu.RLock()
	defer w.mu.RUnlock()
	ps := make([]int32, 0, len(w.parts))
	for id := range w.parts {
		ps = append(ps, id)
	}
	return ps
}

func (w *Writer) trim(ctx context.Context) {
	offs, err := w.proj.Offsets(ctx, w.cfg.Topics.Changes)
	if err != nil {
		w.log.Warn("read projector offsets", "err", err)
		return
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	for id, p := range w.parts {
		p.trim(offs[id])
	}
}

// checkTopic is the topic-identity check (changelog.CheckIdentity): the
// changes topic must be the one the projection was folded from, recorded
// on first use. A reset (changelog.ErrTopicReset) stops the writer until
// an operator rebuilds the projection: writing on would build new
// versions on a state the log no longer holds.
func (w *Writer) checkTopic(ctx context.Context) (changelog.Identity, error) {
	topic := w.cfg.Topics.Changes
	id, err := changelog.CheckIdentity(ctx, w.adm, topic, w.cfg.Topics.Partitions,
		func(ctx context.Context, id changelog.Identity) (changelog.Recorded, error) {
			rec, err := w.proj.ClaimTopic(ctx, projection.Topic{Name: topic, ID: id.ID.String(), Partitions: id.Partitions})
			return changelog.Recorded{ID: rec.ID, Partitions: rec.Partitions, Since: rec.FirstSeen}, err
		})
	if e, ok := errors.AsType[*changelog.ResetError](err); ok {
		w.log.Error("changes topic reset detected; refusing to write: "+e.Msg,
			append([]any{"topic", topic, "reason", e.Reason}, e.Attrs...)...)
	}
	return id, err
}

func (w *Writer) refreshOwners(ctx context.Context) {
	owners, err := w.proj.Owners(ctx)
	if err != nil {
		w.log.Warn("read partition owners", "err", err)
		return
	}
	w.owners.Store(&owners)
	w.clearLoops(owners)
	w.recordOwned(ctx, owners)
}

// recordOwned records again the ownership of each partition this writer
// serves whose record (owners) names another writer or epoch, or none:
// own records it once, when the partition turns ready, and a record
// that failed then, or that a stalled writer overwrote with its own
// stale claim (SetOwner refuses an older epoch, but not one from the
// other side of a fence's epoch wrapping), would otherwise send the
// other writers' forwards astray until the partition moves again (chaos
// saw a partition answer 503 through every writer for 30 s after the
// faults healed). A record at a newer epoch is left alone: this writer
// is the stale one, and learns it at its next round.
func (w *Writer) recordOwned(ctx context.Context, owners map[int32]projection.Owner) {
	id, addr := w.cfg.InstanceID, w.cfg.AdvertiseURL
	if addr == "" {
		return
	}
	type claim struct {
		part  int32
		epoch int64
	}
	var claims []claim
	w.mu.RLock()
	for part, p := range w.parts {
		p.mu.RLock()
		ready, epoch := p.ready, p.epoch
		p.mu.RUnlock()
		o, ok := owners[part]
		if ready && (!ok || o.ID != id || o.Addr != addr || o.Epoch != epoch) && !(ok && projection.NewerOwner(o.Epoch, epoch)) {
			claims = append(claims, claim{part, epoch})
		}
	}
	w.mu.RUnlock()
	for _, c := range claims {
		if err := w.proj.SetOwner(ctx, c.part, id, addr, c.epoch); err != nil {
			w.log.Warn("record partition ownership again", "partition", c.part, "err", err)
			continue
		}
		w.log.Info("partition ownership recorded again", "partition", c.part, "epoch", c.epoch, "recorded", owners[c.part].ID)
	}
}

func (w *Writer) partition(key contract.Key) (int32, *partition) {
	id := changelog.Partition(key.Scope(), w.cfg.Topics.Partitions)
	w.mu.RLock()
	defer w.mu.RUnlock()
	return id, w.parts[id]
}

// Do decides and appends one write, and answers once it committed (or was
// rejected). Errors are *contract.Error. When ctx ends before the answer
// (the server's request deadline), a write refused before it was queued
// (not owned, too large, the partition not ready or full) is
// partition_unavailable: nothing of it was written; one queued is
// outcome_unknown, since the partition may still commit it.
func (w *Writer) Do(ctx context.Context, cmd decide.Command) (Result, error) {
	r := cmd.Head()
	id, p := w.partition(r.Key)
	if p == nil {
		return Result{}, errUnavailable(id, "not owned by this writer")
	}
	if n := batchbytes.LeastBytes(cmd); n > w.limits.Budget(w.cfg.Topics.Changes) {
		// It could never be appended: refused before it takes a place
		// in a batch (package batchbytes).
		w.metrics.writes.WithLabelValues(contract.ETooLarge).Inc()
		return Result{}, w.limits.ErrTooLarge(cmd, w.cfg.Topics.Changes, n)
	}
	if ctx.Err() != nil {
		// The deadline passed before the write was queued (a slow
		// body): nothing of it may be written now.
		return Result{}, errUnavailable(id, "not answering in time")
	}
	c := &call{cmd: cmd, done: make(chan answer, 1), ctx: ctx}
	if err := p.submit(c); err != nil {
		return Result{}, err
	}
	select {
	case a := <-c.done:
		return a.res, a.err
	case <-ctx.Done():
		if c.withdraw() {
			// Still queued: it will never be decided.
			return Result{}, errUnavailable(id, "not answering in time (the write was not applied)")
		}
		return Result{}, errOutcomeUnknown(id, r, "did not answer in time")
	}
}

// AuditDenied records in kv.conflicts, reason forbidden, that principal
// was refused (403) the write op of key: fire and forget, it never blocks.
// The record is decided and committed by the partition's owner like any
// conflict; a writer that does not own the key's partition drops it (and
// counts it, not_owner) rather than forwarding it, and so does an owner
// whose partition is not ready or whose queue is half full (dropped), so
// denials never take the room of writes.
func (w *Writer) AuditDenied(key contract.Key, op contract.Op, principal, requestID string) {
	_, p := w.partition(key)
	if p == nil {
		w.metrics.deniedAudits.WithLabelValues("not_owner").Inc()
		return
	}
	r := &decide.KV{Header: decide.Header{Key: key, Op: op, Principal: principal, RequestID: requestID}, Denied: true}
	if !p.offer(&call{cmd: r, done: make(chan answer, 1)}) {
		w.metrics.deniedAudits.WithLabelValues("dropped").Inc()
		return
	}
	w.metrics.deniedAudits.WithLabelValues("queued").Inc()
}

// State returns the current state of a key as its partition's owner
// knows it: from the overlay when it holds a newer event than the
// projection, else from the state cache, else from the projection, which
// holds everything older. Only
// the owner of a caught-up partition answers; anyone else answers
// partition_unavailable, because the projection alone may lag the log.
func (w *Writer) State(ctx context.Context, key contract.Key) (keystate.State, error) {
	s, _, err := w.StateAt(ctx, key)
	return s, err
}

// StateAt is State and the position of the key's partition the state
// reflects: it holds every event of the key at an offset up to the
// position and none after, so a watch after the position delivers
// exactly the key's later changes.
//
// An answer from the overlay or the state cache is as of end - 1, end
// read under the same lock: committed adds a transaction's events to the
// overlay and moves end past its commit marker together, and the cache
// holds only states no overlay entry shadows (a newer event of the key
// is in the overlay). An answer from the projection is read together
// with the projector's position (one statement, StateAt of the
// projection) and is as of the later of the two: the overlay held no
// event of the key when it was looked at, so the key had none in
// [projected, end) — its events below end are all in the projection;
// and an event the projection holds past end (committed, projected, not
// yet added here) is below the projector's position.
func (w *Writer) StateAt(ctx context.Context, key contract.Key) (keystate.State, contract.Cursor, error) {
	id, p := w.partition(key)
	at := contract.Cursor{Partition: id}
	if p == nil {
		return keystate.State{}, at, errUnavailable(id, "not owned by this writer")
	}
	if err := p.confirm(ctx); err != nil {
		return keystate.State{}, at, err
	}
	s, ok, ready, look := p.lookupAt(key.String())
	if !ready {
		return keystate.State{}, at, errUnavailable(id, "catching up or moving between writers")
	}
	at.Offset = look.end - 1
	if ok {
		return s, at, nil
	}
	s, projected, err := w.proj.StateAt(ctx, w.cfg.Topics.Changes, id, key.String())
	if err != nil {
		return keystate.State{}, at, err
	}
	if projected < look.end {
		// Nothing the projection holds is past what this owner knows:
		// safe to cache (cacheGet says when it is also still current).
		p.cacheGet(key.String(), s, look.changes)
	}
	at.Offset = max(at.Offset, projected)
	return s, at, nil
}

// Ready reports whether the writer is a member of the group, every
// partition it owns has caught up, and the brokers answered its probe
// within the last 1.5 s (package brokerprobe). A member that owns no
// partition (more writers than partitions) is ready: it forwards every
// request.
func (w *Writer) Ready() bool {
	if !w.brokers.Answering(time.Now()) {
		return false
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	if !w.joined {
		return false
	}
	for _, p := range w.parts {
		p.mu.RLock()
		ok := p.ready
		p.mu.RUnlock()
		if !ok {
			return false
		}
	}
	return true
}

func (w *Writer) logDecision(cmd decide.Command, d decide.Decision) {
	r := cmd.Head()
	kv, _ := cmd.(*decide.KV)
	txn, _ := cmd.(*decide.Txn)
	_, prefix := cmd.(*decide.Range)
	switch {
	case kv != nil && kv.Denied:
		// The API logged the denial; this is its audit record.
		w.metrics.writes.WithLabelValues("denied_audited").Inc()
	case txn != nil:
		w.logTxn(txn, d)
	case d.Err == nil && d.Event == nil && d.Result.Prefix.Prefix != "":
		w.metrics.writesOK.Inc()
		w.log.Info("prefix written", "op", r.Op, "prefix", d.Result.Prefix.Prefix, "count", d.Result.Prefix.Count,
			"truncated", d.Result.Prefix.Truncated, "txnId", d.Result.Prefix.TxnID, "principal", r.Principal, "directive", r.Directive)
	case d.Event != nil && d.Event.Kind == contract.KindExpire:
		w.metrics.writes.WithLabelValues("expired").Inc()
		w.log.Info("expired", "key", d.Event.Key, "version", d.Event.Version, "expiresAt", d.Event.ExpiresAt,
			"purpose", d.Event.Semantics.Purpose, "producer", d.Event.Semantics.Producer,
			"consumerHints", d.Event.Semantics.ConsumerHints, "ttlSeconds", d.Event.Semantics.TTLSeconds,
			"specRef", d.Event.SpecRef) // never a value: logs hold no value, ever
	case d.Event != nil:
		w.metrics.writesOK.Inc()
		w.logWrite(r, d.Event)
	case d.Conflict != nil && prefix:
		w.metrics.writes.WithLabelValues("conflict").Inc()
		w.log.Warn("prefix write refused", "correlationId", d.Conflict.ID, "op", r.Op, "prefix", d.Conflict.Key,
			"reason", d.Conflict.Reason, "requestId", r.RequestID, "principal", r.Principal, "agent", agentOf(r), "directive", r.Directive)
	case d.Conflict != nil:
		w.metrics.writes.WithLabelValues("conflict").Inc()
		w.log.Warn("version conflict", "correlationId", d.Conflict.ID, "key", d.Conflict.Key,
			"expectedVersion", d.Conflict.ExpectedVersion, "currentVersion", d.Conflict.CurrentVersion,
			"reason", d.Conflict.Reason, "purpose", d.Conflict.Semantics.Purpose, "requestId", r.RequestID, "principal", r.Principal,
			"agent", agentOf(r), "directive", r.Directive)
	case d.Result.Replayed:
		w.metrics.writes.WithLabelValues("replayed").Inc()
		w.log.Info("write replayed", "key", r.Key.String(), "version", d.Result.Entry.Version, "requestId", r.RequestID,
			"principal", r.Principal, "directive", r.Directive)
	case errors.Is(d.Err, decide.ErrNotExpired):
		w.metrics.writes.WithLabelValues("expire_skipped").Inc()
	default:
		w.metrics.writes.WithLabelValues(contract.ErrorCode(d.Err)).Inc()
	}
}

// logWrite is the INFO line of every acknowledged write: the busiest
// log line, so it is built from typed attributes (slog.LogAttrs, no
// []any boxing, no reflection on events' named string types) and skipped
// whole when INFO is off. It names the key and version, never a value,
// and who wrote: the principal, its agent and the directive (the seed's
// structured write log: directive, key, purpose, requestId, version).
func (w *Writer) logWrite(r *decide.Header, e *contract.Event) {
	ctx := context.Background()
	if !w.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	w.log.LogAttrs(ctx, slog.LevelInfo, "write", slog.String("key", e.Key), slog.Int64("version", e.Version),
		slog.String("kind", string(e.Kind)), slog.String("op", string(e.Op)), slog.String("purpose", e.Semantics.Purpose),
		slog.String("requestId", r.RequestID), slog.String("principal", r.Principal),
		slog.String("agent", agentOf(r)), slog.String("directive", r.Directive))
}

// agentOf is the agent of a write's principal: the part before ':' of
// a principal named <agent>:<directive>, else the whole principal (a
// service account).
func agentOf(r *decide.Header) string {
	agent, _ := contract.SplitPrincipal(r.Principal)
	return agent
}

// logTxn logs and counts a transaction's outcome, as one write request
// (ok, replayed, conflict or an error code). Its log lines name keys and
// versions, never a value.
func (w *Writer) logTxn(r *decide.Txn, d decide.Decision) {
	attrs := []any{"txnId", d.Result.TxnID, "scope", r.Key.Scope(), "ops", len(r.Steps), "requestId", r.RequestID, "principal", r.Principal,
		"directive", r.Directive}
	switch {
	case d.Result.Replayed:
		w.metrics.writes.WithLabelValues("replayed").Inc()
		w.log.Info("transaction replayed", attrs...)
	case d.Err == nil:
		w.metrics.writesOK.Inc()
		w.log.Info("transaction", append(attrs, "events", len(d.Txn))...)
	case d.Conflict != nil:
		w.metrics.writes.WithLabelValues("conflict").Inc()
		c := d.Conflict
		attrs[1] = c.TxnID
		w.log.Warn("transaction rejected", append(attrs, "failedOp", *c.TxnOp, "key", c.Key, "reason", c.Reason,
			"correlationId", c.ID, "expectedVersion", c.ExpectedVersion, "currentVersion", c.CurrentVersion)...)
	default:
		w.metrics.writes.WithLabelValues(contract.ErrorCode(d.Err)).Inc()
	}
}
