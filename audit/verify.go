package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/kafkaconf"
)

// Scope selects the keys to verify: those starting with Prefix (a tenant
// is the prefix "tenant/<tenant>/") and in [From, To) when those are set.
type Scope struct {
	Prefix string
	From   string
	To     string
}

// TenantScope is the scope of one tenant.
func TenantScope(tenant string) Scope { return Scope{Prefix: "tenant/" + tenant + "/"} }

// Match reports whether key is in the scope.
func (s Scope) Match(key string) bool {
	return strings.HasPrefix(key, s.Prefix) && (s.From == "" || key >= s.From) && (s.To == "" || key < s.To)
}

// where returns the SQL conditions (each starting with " AND ") and
// their arguments that select the scope's keys.
func (s Scope) where() (string, []any) {
	var (
		q    string
		args []any
	)
	if s.Prefix != "" {
		q += " AND startsWith(key, ?)"
		args = append(args, s.Prefix)
	}
	if s.From != "" {
		q += " AND key >= ?"
		args = append(args, s.From)
	}
	if s.To != "" {
		q += " AND key < ?"
		args = append(args, s.To)
	}
	return q, args
}

func (s Scope) String() string {
	var parts []string
	if s.Prefix != "" {
		parts = append(parts, "prefix "+s.Prefix)
	}
	if s.From != "" || s.To != "" {
		parts = append(parts, fmt.Sprintf("keys [%q, %q)", s.From, s.To))
	}
	if len(parts) == 0 {
		return "all keys"
	}
	return strings.Join(parts, ", ")
}

// VerifyConfig says what to verify against.
type VerifyConfig struct {
	Brokers []string
	// Kafka is how the clients reach the brokers (TLS, SASL); zero:
	// plaintext.
	Kafka  kafkaconf.Conn
	Topics changelog.Topics
	// Group is the auditor's consumer group; its committed offsets say
	// which events must have their rows already. Default Group.
	Group string
	Scope Scope
	// Wait is how long to wait for the group to commit up to the last
	// stable offsets before verifying what it has committed.
	Wait time.Duration
}

// Problems a Discrepancy names.
const (
	ProblemRowMissing     = "row_missing"      // an event (or a chained-to version) has no row
	ProblemRowAltered     = "row_altered"      // a row's fields do not match its chain hash or its event
	ProblemChainBroken    = "chain_broken"     // a row does not link to the key's previous row
	ProblemEventMissing   = "event_missing"    // a row has no event, and compaction does not explain it
	ProblemDuplicateRows  = "duplicate_rows"   // one identity has rows that differ
	ProblemUnknownKeyID   = "unknown_key_id"   // a row is hashed under a key not configured
	ProblemUnknownScheme  = "unknown_scheme"   // a row's hash_scheme is not one this auditor computes
	ProblemConflictAbsent = "conflict_missing" // a conflict record has no row
	ProblemConflictWrong  = "conflict_altered" // a conflict row differs from its record
)

// Discrepancy is one way the trail and the log disagree.
type Discrepancy struct {
	Key     string `json:"key"`
	Version int64  `json:"version,omitempty"`
	// ConflictID is set for conflict rows.
	ConflictID string `json:"conflictId,omitempty"`
	Problem    string `json:"problem"`
	Detail     string `json:"detail"`
}

func (d Discrepancy) String() string {
	id := fmt.Sprintf("%s@%d", d.Key, d.Version)
	if d.ConflictID != "" {
		id = d.Key + " conflict " + d.ConflictID
	}
	return fmt.Sprintf("%s: %s: %s", id, d.Problem, d.Detail)
}

// VerifyReport is the outcome of Verify. The trail verifies when
// Discrepancies is empty.
type VerifyReport struct {
	Scope  string `json:"scope"`
	Rows   int    `json:"rows"`   // distinct rows checked
	Events int    `json:"events"` // events of kv.changes in scope
	Keys   int    `json:"keys"`
	// ChainStarts are rows past version 1 that start their key's chain:
	// the auditor never saw the versions before (compacted away first).
	ChainStarts int `json:"chainStarts"`
	// Compacted are rows whose event compaction removed from kv.changes;
	// a later version of the key is there, and the chain links through.
	Compacted int `json:"compacted"`
	// Pending are events at or past the group's committed offsets
	// without a row yet: the auditor has not committed them.
	Pending       int           `json:"pending"`
	Conflicts     int           `json:"conflicts"` // conflict records checked
	Discrepancies []Discrepancy `json:"discrepancies"`
	// Partitions are the ranges of kv.changes read, by partition.
	Partitions []PartitionRange `json:"partitions,omitempty"`
}

// PartitionRange is what a verification covered of one partition of
// kv.changes: the offsets From (the partition's start) to To (its last
// stable offset), of which the auditor's group had committed up to
// Committed (-1: nothing): events from Committed on count as pending.
type PartitionRange struct {
	Partition int32 `json:"partition"`
	From      int64 `json:"from"`
	To        int64 `json:"to"`
	Committed int64 `json:"committed"`
}

// partitionRanges are the ranges vf read of kv.changes, by partition.
func (vf *verification) partitionRanges() []PartitionRange {
	topic := vf.cfg.Topics.Changes
	out := make([]PartitionRange, 0, len(vf.ends[topic]))
	for p, end := range vf.ends[topic] {
		c, ok := vf.committed[topic][p]
		if !ok {
			c = -1
		}
		out = append(out, PartitionRange{Partition: p, From: vf.starts[topic][p], To: end, Committed: c})
	}
	slices.SortFunc(out, func(a, b PartitionRange) int { return cmp.Compare(a.Partition, b.Partition) })
	return out
}

// maxDiscrepancies bounds the discrepancies a report lists.
const maxDiscrepancies = 1000

// located is an event or conflict and where it is in its topic.
type located[T any] struct {
	v         T
	partition int32
	offset    int64
}

// Verify recomputes the hash chains of the rows in scope and matches them
// to kv.changes: every committed event has its row with the same fields
// and hashes; every row has its event, except rows whose event compaction
// removed (a later version of the key is in the topic, at a later offset,
// and the chain links through the row); a row past version 1 whose
// previous row is absent starts a chain only when the topic does not
// hold that previous version either. Conflict records of kv.conflicts
// must have their rows too. Discrepancies are sorted by key and version;
// an error means verification could not run.
func Verify(ctx context.Context, s *Store, keys *Keyring, cfg VerifyConfig) (*VerifyReport, error) {
	if cfg.Group == "" {
		cfg.Group = Group
	}
	cl, err := cfg.Kafka.NewClient("auditor_verify", cfg.Brokers)
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	starts, ends, err := logRanges(ctx, adm, cfg.Topics.Changes, cfg.Topics.Conflicts)
	if err != nil {
		return nil, err
	}
	committed, err := waitCommitted(ctx, adm, cfg, ends)
	if err != nil {
		return nil, err
	}
	vf := &verification{cl: cl, s: s, keys: keys, cfg: cfg, starts: starts, ends: ends, committed: committed,
		rep: &VerifyReport{Scope: cfg.Scope.String()}}
	if err := vf.run(ctx); err != nil {
		return nil, err
	}
	vf.rep.Discrepancies = sortDiscrepancies(vf.ds)
	vf.rep.Partitions = vf.partitionRanges()
	return vf.rep, nil
}

// verification is one run of Verify: what it reads from and what it has
// found so far.
type verification struct {
	cl                      *kgo.Client
	s                       *Store
	keys                    *Keyring
	cfg                     VerifyConfig
	starts, ends, committed map[string]map[int32]int64 // by topic and partition
	rep                     *VerifyReport
	ds                      []Discrepancy
}

func (vf *verification) add(d Discrepancy) { vf.ds = append(vf.ds, d) }

// pending reports whether an event of kv.changes is at or past the
// group's committed offset: the auditor has not committed it yet.
func (vf *verification) pending(l located[contract.Event]) bool {
	o, ok := vf.committed[vf.cfg.Topics.Changes][l.partition]
	return !ok || l.offset >= o
}

func (vf *verification) run(ctx context.Context) error {
	evs, err := vf.readEvents(ctx)
	if err != nil {
		return err
	}
	keysSeen, err := vf.checkRows(ctx, evs)
	if err != nil {
		return err
	}
	// Keys of the log without any row.
	rep := vf.rep
	rep.Keys = len(keysSeen)
	for key, vs := range evs {
		if keysSeen[key] {
			continue
		}
		rep.Keys++
		for v, l := range vs {
			if vf.pending(l) {
				rep.Pending++
				continue
			}
			vf.add(Discrepancy{Key: key, Version: v, Problem: ProblemRowMissing,
				Detail: fmt.Sprintf("the event at %s/%d@%d has no row", vf.cfg.Topics.Changes, l.partition, l.offset)})
		}
	}
	return vf.verifyConflicts(ctx)
}

// logRanges returns the start and last stable offsets of each partition
// of topics.
func logRanges(ctx context.Context, adm *kadm.Client, topics ...string) (starts, ends map[string]map[int32]int64, err error) {
	starts, ends = map[string]map[int32]int64{}, map[string]map[int32]int64{}
	for _, t := range topics {
		if ends[t], err = listed(ctx, "last stable offsets", t, adm.ListCommittedOffsets); err != nil {
			return nil, nil, err
		}
		// Compaction and retention move the start of a partition.
		if starts[t], err = listed(ctx, "start offsets", t, adm.ListStartOffsets); err != nil {
			return nil, nil, err
		}
	}
	return starts, ends, nil
}

// listed returns the offsets list lists for topic, by partition.
func listed(ctx context.Context, what, topic string, list func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
	lo, err := list(ctx, topic)
	if err == nil {
		err = lo.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("verify: %s of %s: %w", what, topic, err)
	}
	offs := map[int32]int64{}
	lo.Each(func(o kadm.ListedOffset) { offs[o.Partition] = o.Offset })
	return offs, nil
}

// readEvents reads the events of kv.changes in scope, from the start to
// the last stable offset of each partition, by key and version, counting
// them in the report.
func (vf *verification) readEvents(ctx context.Context) (map[string]map[int64]located[contract.Event], error) {
	topic := vf.cfg.Topics.Changes
	starts, ends := vf.starts[topic], vf.ends[topic]
	evs := map[string]map[int64]located[contract.Event]{}
	for p := range ends {
		err := changelog.ReadCommitted(ctx, vf.cl, changelog.Range{Topic: topic, Partition: p, From: starts[p], End: ends[p]}, func(r *kgo.Record) error {
			if !vf.cfg.Scope.Match(changelog.EventKeyOf(r.Key)) {
				return nil
			}
			e, err := changelog.Event(r)
			if err != nil {
				return err
			}
			if evs[e.Key] == nil {
				evs[e.Key] = map[int64]located[contract.Event]{}
			}
			evs[e.Key][e.Version] = located[contract.Event]{e, r.Partition, r.Offset}
			vf.rep.Events++
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("verify: read %s/%d: %w", topic, p, err)
		}
	}
	return evs, nil
}

// checkRows checks the rows in scope key by key, in version order,
// against evs (checkKey), and returns the keys that have rows.
func (vf *verification) checkRows(ctx context.Context, evs map[string]map[int64]located[contract.Event]) (map[string]bool, error) {
	keysSeen := map[string]bool{}
	var cur []Row // rows of the current key, one per version
	var curDup map[int64][]Row
	flush := func() {
		if len(cur) == 0 {
			return
		}
		key := cur[0].Key
		keysSeen[key] = true
		vf.checkKey(key, cur, curDup, evs[key])
		cur, curDup = cur[:0], nil
	}
	err := vf.s.scanEvents(ctx, vf.cfg.Scope, func(r Row, tsOK bool) {
		if len(cur) > 0 && cur[0].Key != r.Key {
			flush()
		}
		if !tsOK {
			vf.add(Discrepancy{Key: r.Key, Version: r.Version, Problem: ProblemRowAltered,
				Detail: "column ts does not match ts_us (the chain covers ts_us)"})
		}
		if n := len(cur); n > 0 && cur[n-1].Version == r.Version {
			if curDup == nil {
				curDup = map[int64][]Row{}
			}
			curDup[r.Version] = append(curDup[r.Version], r)
			return
		}
		cur = append(cur, r)
	})
	if err != nil {
		return nil, err
	}
	flush()
	return keysSeen, nil
}

// sortDiscrepancies sorts ds by key, version, conflict and problem, drops
// repeats and keeps the first maxDiscrepancies.
func sortDiscrepancies(ds []Discrepancy) []Discrepancy {
	slices.SortFunc(ds, func(a, b Discrepancy) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), cmp.Compare(a.Version, b.Version),
			strings.Compare(a.ConflictID, b.ConflictID), strings.Compare(a.Problem, b.Problem))
	})
	ds = slices.CompactFunc(ds, func(a, b Discrepancy) bool {
		return a.Key == b.Key && a.Version == b.Version && a.ConflictID == b.ConflictID && a.Problem == b.Problem
	})
	if len(ds) > maxDiscrepancies {
		ds = ds[:maxDiscrepancies]
	}
	return ds
}

// checkKey verifies the rows of one key (one per version, in order; dups
// holds further rows of a version) against its events.
func (vf *verification) checkKey(key string, rows []Row, dups map[int64][]Row, evs map[int64]located[contract.Event]) {
	rep, add := vf.rep, vf.add
	byVersion := make(map[int64]*Row, len(rows))
	var latest located[contract.Event]
	for _, l := range evs {
		if l.v.Version > latest.v.Version {
			latest = l
		}
	}
	for i := range rows {
		r := &rows[i]
		byVersion[r.Version] = r
		rep.Rows++
		bad := func(problem, format string, args ...any) {
			add(Discrepancy{Key: key, Version: r.Version, Problem: problem, Detail: fmt.Sprintf(format, args...)})
		}
		for _, d := range dups[r.Version] {
			if !sameRow(r, &d) {
				bad(ProblemDuplicateRows, "two rows differ: chain hashes %s and %s", short(r.ChainHash), short(d.ChainHash))
				break
			}
		}
		k, ok := vf.keys.Lookup(r.HashKeyID)
		if !ok {
			bad(ProblemUnknownKeyID, "hashed under key id %q, which is not configured (add it to the key file or ESKV_AUDIT_OLD_KEYS)", r.HashKeyID)
			continue
		}
		if !r.HashScheme.Valid() {
			bad(ProblemUnknownScheme, "hash_scheme %d is not a scheme this auditor computes (1 or 2)", r.HashScheme)
			continue
		}
		if want := ChainHash(k, r); want != r.ChainHash {
			bad(ProblemRowAltered, "its fields do not match its chain hash %s (recomputed %s)", short(r.ChainHash), short(want))
		}

		vf.checkLink(r, byVersion, evs)

		// The row against its event.
		l, ok := evs[r.Version]
		if !ok {
			if latest.v.Version > r.Version && latest.partition == r.Partition && latest.offset > r.Offset {
				rep.Compacted++
			} else {
				bad(ProblemEventMissing, "kv.changes holds no event for it (partition %d offset %d), and no later version of the key that compaction would keep instead", r.Partition, r.Offset)
			}
			continue
		}
		want := EventRow(&l.v, At{Partition: l.partition, Offset: l.offset}, k, r.HashScheme, r.PrevChainHash)
		if col := diffRow(&want, r); col != "" {
			bad(ProblemRowAltered, "column %s differs from its event at %d@%d", col, l.partition, l.offset)
		}
	}
	for v, l := range evs {
		if _, ok := byVersion[v]; ok {
			continue
		}
		if vf.pending(l) {
			rep.Pending++
			continue
		}
		add(Discrepancy{Key: key, Version: v, Problem: ProblemRowMissing,
			Detail: fmt.Sprintf("the event at partition %d offset %d has no row", l.partition, l.offset)})
	}
}

// checkLink checks the link of r to the key's previous row (rows by
// version so far, events by version).
func (vf *verification) checkLink(r *Row, byVersion map[int64]*Row, evs map[int64]located[contract.Event]) {
	rep, add := vf.rep, vf.add
	bad := func(problem, format string, args ...any) {
		add(Discrepancy{Key: r.Key, Version: r.Version, Problem: problem, Detail: fmt.Sprintf(format, args...)})
	}
	prev, hasPrev := byVersion[r.PrevVersion]
	switch {
	case r.PrevChainHash == "" && r.PrevVersion == 0:
	case r.PrevChainHash == "":
		if hasPrev {
			bad(ProblemChainBroken, "it starts a chain, but the row of version %d exists", r.PrevVersion)
		} else if l, ok := evs[r.PrevVersion]; ok {
			bad(ProblemChainBroken, "it starts a chain, but kv.changes holds version %d (at %d@%d)", r.PrevVersion, l.partition, l.offset)
		} else {
			rep.ChainStarts++
		}
	case !hasPrev:
		add(Discrepancy{Key: r.Key, Version: r.PrevVersion, Problem: ProblemRowMissing,
			Detail: fmt.Sprintf("the row of version %d chains to it (prev chain hash %s), and it is gone", r.Version, short(r.PrevChainHash))})
	case prev.ChainHash != r.PrevChainHash:
		bad(ProblemChainBroken, "its prev chain hash %s is not the chain hash %s of version %d", short(r.PrevChainHash), short(prev.ChainHash), r.PrevVersion)
	}
}

// diffRow names the first column where got differs from want.
func diffRow(want, got *Row) string {
	switch {
	case !want.TS.Equal(got.TS):
		return "ts_us"
	case want.Tenant != got.Tenant:
		return "tenant"
	case want.Project != got.Project:
		return "project"
	case want.PrevVersion != got.PrevVersion:
		return "prev_version"
	case want.Kind != got.Kind:
		return "kind"
	case want.Op != got.Op:
		return "op"
	case want.Purpose != got.Purpose:
		return "purpose"
	case want.Producer != got.Producer:
		return "producer"
	case !slices.Equal(want.ConsumerHints, got.ConsumerHints):
		return "consumer_hints"
	case want.Principal != got.Principal:
		return "principal"
	case want.Directive != got.Directive:
		return "directive"
	case want.RequestID != got.RequestID:
		return "request_id"
	case want.SpecRef != got.SpecRef:
		return "spec_ref"
	case want.TTLSeconds != got.TTLSeconds:
		return "ttl_seconds"
	case want.ExpiresAtUS != got.ExpiresAtUS:
		return "expires_at_us"
	case want.BeforeHash != got.BeforeHash:
		return "before_hash"
	case want.AfterHash != got.AfterHash:
		return "after_hash"
	case want.ChainHash != got.ChainHash:
		return "chain_hash"
	case want.Partition != got.Partition:
		return "kafka_partition"
	case want.Offset != got.Offset:
		return "kafka_offset"
	case want.TxnID != got.TxnID || want.TxnSize != got.TxnSize:
		return "txn_id/txn_size"
	case want.ElementOp != got.ElementOp || want.ElementHash != got.ElementHash:
		return "element_op/element_hash"
	}
	return ""
}

func sameRow(a, b *Row) bool {
	return diffRow(a, b) == "" && a.HashKeyID == b.HashKeyID && a.HashScheme == b.HashScheme && a.PrevChainHash == b.PrevChainHash
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12] + "…"
	}
	if h == "" {
		return `""`
	}
	return h
}

// waitCommitted returns the group's committed offsets, after waiting up
// to cfg.Wait for them to reach the last stable offsets.
func waitCommitted(ctx context.Context, adm *kadm.Client, cfg VerifyConfig, ends map[string]map[int32]int64) (map[string]map[int32]int64, error) {
	deadline := time.Now().Add(cfg.Wait)
	for {
		fo, err := adm.FetchOffsets(ctx, cfg.Group)
		if err != nil {
			return nil, fmt.Errorf("verify: committed offsets of group %s: %w", cfg.Group, err)
		}
		committed := map[string]map[int32]int64{}
		fo.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				if committed[o.Topic] == nil {
					committed[o.Topic] = map[int32]int64{}
				}
				committed[o.Topic][o.Partition] = o.At
			}
		})
		caughtUp := true
		for t, ps := range ends {
			for p, end := range ps {
				if end > 0 && committed[t][p] < end {
					caughtUp = false
				}
			}
		}
		if caughtUp || time.Now().After(deadline) {
			return committed, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// scanEvents calls fn for every row of audit_events in scope, duplicates
// included, ordered by key and version. tsOK is false when the row's ts
// does not match its ts_us.
func (s *Store) scanEvents(ctx context.Context, sc Scope, fn func(r Row, tsOK bool)) error {
	q := "SELECT ts, " + strings.TrimPrefix(strings.TrimSuffix(eventColumns, ", ingested_at"), "ts, ") + " FROM audit_events WHERE 1"
	where, args := sc.where()
	q += where + " ORDER BY key, version"
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return unavailable("read audit_events", err)
	}
	defer rows.Close()
	for rows.Next() {
		r, tsOK, err := scanRow(rows)
		if err != nil {
			return err
		}
		fn(r, tsOK)
	}
	return rows.Err()
}

// verifyConflicts checks that every committed conflict record in scope has
// its row with the record's fields and hashes.
func (vf *verification) verifyConflicts(ctx context.Context) error {
	cl, keys, cfg, rep, add := vf.cl, vf.keys, vf.cfg, vf.rep, vf.add
	starts, ends, committed := vf.starts, vf.ends, vf.committed
	rows, err := vf.s.conflictRows(ctx, cfg.Scope)
	if err != nil {
		return err
	}
	for p, end := range ends[cfg.Topics.Conflicts] {
		upTo := min(end, committed[cfg.Topics.Conflicts][p])
		err := changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: cfg.Topics.Conflicts, Partition: p, From: starts[cfg.Topics.Conflicts][p], End: upTo}, func(r *kgo.Record) error {
			if !cfg.Scope.Match(string(r.Key)) {
				return nil
			}
			var c decide.Conflict
			if err := json.Unmarshal(r.Value, &c); err != nil {
				return fmt.Errorf("conflict at %d@%d: %w", r.Partition, r.Offset, err)
			}
			rep.Conflicts++
			got, ok := rows[[2]string{c.Key, c.ID}]
			if !ok {
				add(Discrepancy{Key: c.Key, ConflictID: c.ID, Problem: ProblemConflictAbsent,
					Detail: fmt.Sprintf("the conflict record at %s/%d@%d has no row", cfg.Topics.Conflicts, r.Partition, r.Offset)})
				return nil
			}
			k, ok := keys.Lookup(got.HashKeyID)
			if !ok {
				add(Discrepancy{Key: c.Key, ConflictID: c.ID, Problem: ProblemUnknownKeyID,
					Detail: fmt.Sprintf("hashed under key id %q, which is not configured", got.HashKeyID)})
				return nil
			}
			if !got.HashScheme.Valid() {
				add(Discrepancy{Key: c.Key, ConflictID: c.ID, Problem: ProblemUnknownScheme,
					Detail: fmt.Sprintf("hash_scheme %d is not a scheme this auditor computes (1 or 2)", got.HashScheme)})
				return nil
			}
			want := ConflictRowOf(&c, At{Partition: r.Partition, Offset: r.Offset}, k, got.HashScheme)
			want.TS = want.TS.Truncate(time.Microsecond)
			if col := diffConflict(&want, &got); col != "" {
				add(Discrepancy{Key: c.Key, ConflictID: c.ID, Problem: ProblemConflictWrong,
					Detail: fmt.Sprintf("column %s differs from its record at %d@%d", col, r.Partition, r.Offset)})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("verify: read %s/%d: %w", cfg.Topics.Conflicts, p, err)
		}
	}
	return nil
}

func diffConflict(want, got *ConflictRow) string {
	switch {
	case !want.TS.Equal(got.TS):
		return "ts_us"
	case want.Key != got.Key:
		return "key"
	case want.Tenant != got.Tenant || want.Project != got.Project:
		return "tenant/project"
	case want.Op != got.Op || want.Reason != got.Reason:
		return "op/reason"
	case want.Purpose != got.Purpose || want.Producer != got.Producer || !slices.Equal(want.ConsumerHints, got.ConsumerHints):
		return "purpose/producer/consumer_hints"
	case want.Principal != got.Principal || want.Directive != got.Directive || want.RequestID != got.RequestID || want.SpecRef != got.SpecRef:
		return "principal/directive/request_id/spec_ref"
	case want.ExpectedVersion != got.ExpectedVersion || want.CurrentVersion != got.CurrentVersion:
		return "expected_version/current_version"
	case want.AttemptedHash != got.AttemptedHash:
		return "attempted_hash"
	case want.CurrentHash != got.CurrentHash:
		return "current_hash"
	case want.TxnID != got.TxnID || want.TxnOp != got.TxnOp || want.TxnSize != got.TxnSize:
		return "txn_id/txn_op/txn_size"
	}
	return ""
}

// conflictRows returns the conflict rows in scope by key and conflict id.
func (s *Store) conflictRows(ctx context.Context, sc Scope) (map[[2]string]ConflictRow, error) {
	q := `SELECT ts_us, conflict_id, tenant, project, key, op, reason, purpose, producer, consumer_hints, principal, directive,
request_id, spec_ref, expected_version, current_version, attempted_hash, current_hash, hash_key_id, hash_scheme, kafka_partition, kafka_offset,
txn_id, txn_op, txn_size
FROM audit_conflicts WHERE 1`
	where, args := sc.where()
	q += where
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, unavailable("read audit_conflicts", err)
	}
	defer rows.Close()
	out := map[[2]string]ConflictRow{}
	for rows.Next() {
		var r ConflictRow
		var (
			tsUS   int64
			scheme uint8
		)
		if err := rows.Scan(&tsUS, &r.ConflictID, &r.Tenant, &r.Project, &r.Key, &r.Op, &r.Reason, &r.Purpose, &r.Producer,
			&r.ConsumerHints, &r.Principal, &r.Directive, &r.RequestID, &r.SpecRef, &r.ExpectedVersion, &r.CurrentVersion,
			&r.AttemptedHash, &r.CurrentHash, &r.HashKeyID, &scheme, &r.Partition, &r.Offset,
			&r.TxnID, &r.TxnOp, &r.TxnSize); err != nil {
			return nil, fmt.Errorf("read audit_conflicts: %w", err)
		}
		r.HashScheme = Scheme(scheme)
		r.TS = time.UnixMicro(tsUS).UTC()
		out[[2]string{r.Key, r.ConflictID}] = r
	}
	return out, rows.Err()
}
