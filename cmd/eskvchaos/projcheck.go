package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
)

// rebuildSchema is where the harness rebuilds the projection from the log.
const rebuildSchema = "chaos_rebuild"

// projFindings compare the live projection with the log.
type projFindings struct {
	// FoldDiffs: keys whose kv_entries row differs from the key's last
	// event in the log (version, liveness, value), or rows of keys the
	// log does not have.
	FoldDiffs []string
	// LostInProjection: acknowledged writes missing from kv_history.
	LostInProjection []string
	// Rebuild is the diff of a rebuild from the log (projection.Apply into
	// a fresh schema, as `projector rebuild` does) against the live
	// projection (projection.Compare, as `projector diff` does).
	Rebuild *projection.Diff
}

// diffCount is what "projection diff" prints: every difference found.
func (f projFindings) diffCount() int64 {
	n := int64(len(f.FoldDiffs))
	if f.Rebuild != nil {
		n += f.Rebuild.Differing + f.Rebuild.NotCompared + f.Rebuild.HistoryMismatch
		if f.Rebuild.History != f.Rebuild.AgainstHistory {
			n++
		}
	}
	return n
}

// waitProjected waits until the live projection stored, for every
// partition, an offset past the log's last event.
func waitProjected(ctx context.Context, s *stack, l *theLog, timeout time.Duration) error {
	ends := l.lastEventEnds()
	var lag string
	err := s.waitFor(ctx, timeout, "the projection to hold every event of the log", func() bool {
		got, err := s.store.Offsets(ctx, s.topics.Changes)
		if err != nil {
			lag = err.Error()
			return false
		}
		for p, e := range ends {
			if got[p] < e {
				lag = fmt.Sprintf("partition %d stored %d, log's last event ends at %d", p, got[p], e)
				return false
			}
		}
		return true
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, lag)
	}
	return nil
}

// checkProjection compares the live projection with the fold of the log
// computed here, looks up every acknowledged write in kv_history, and
// rebuilds the projection from the log to diff it with the live one.
func checkProjection(ctx context.Context, s *stack, l *theLog, acks []acked) (projFindings, error) {
	var f projFindings
	last := map[string]events.Event{}
	for _, le := range l.Events {
		if le.Event.Version > last[le.Event.Key].Version {
			last[le.Event.Key] = le.Event
		}
	}
	rows, err := s.db.Query(ctx, `SELECT key, version, live, value FROM kv_entries`)
	if err != nil {
		return f, fmt.Errorf("read kv_entries: %w", err)
	}
	var (
		key   string
		ver   int64
		live  bool
		value *string
	)
	inRows := map[string]bool{}
	if _, err := pgx.ForEachRow(rows, []any{&key, &ver, &live, &value}, func() error {
		inRows[key] = true
		e, ok := last[key]
		switch {
		case !ok:
			f.FoldDiffs = append(f.FoldDiffs, fmt.Sprintf("%s: in kv_entries (version %d) but not in the log", key, ver))
		case e.Version != ver || e.Live() != live:
			f.FoldDiffs = append(f.FoldDiffs, fmt.Sprintf("%s: kv_entries has version %d live %v, the log version %d live %v", key, ver, live, e.Version, e.Live()))
		case live && (value == nil || !jsonEqual([]byte(*value), e.After)):
			f.FoldDiffs = append(f.FoldDiffs, fmt.Sprintf("%s@%d: kv_entries has value %v, the log %s", key, ver, deref(value), e.After))
		}
		return nil
	}); err != nil {
		return f, fmt.Errorf("read kv_entries: %w", err)
	}
	for k, e := range last {
		if !inRows[k] {
			f.FoldDiffs = append(f.FoldDiffs, fmt.Sprintf("%s: version %d in the log, no kv_entries row", k, e.Version))
		}
	}

	hist := map[string]string{}
	rows, err = s.db.Query(ctx, `SELECT key, version, event->'after' FROM kv_history`)
	if err != nil {
		return f, fmt.Errorf("read kv_history: %w", err)
	}
	var after []byte
	if _, err := pgx.ForEachRow(rows, []any{&key, &ver, &after}, func() error {
		hist[fmt.Sprintf("%s@%d", key, ver)] = string(after)
		return nil
	}); err != nil {
		return f, fmt.Errorf("read kv_history: %w", err)
	}
	for _, a := range acks {
		got, ok := hist[fmt.Sprintf("%s@%d", a.Key, a.Version)]
		if !ok || !jsonEqual([]byte(got), mustJSON(a.Value)) {
			f.LostInProjection = append(f.LostInProjection, fmt.Sprintf("%s: kv_history has %q", a, got))
		}
	}

	if f.Rebuild, err = rebuild(ctx, s, l); err != nil {
		return f, err
	}
	return f, nil
}

// rebuild folds the log into a fresh schema with the projection's own
// Apply, up to the last stable offsets, and compares it with the live
// projection.
func rebuild(ctx context.Context, s *stack, l *theLog) (*projection.Diff, error) {
	if _, err := projection.CreateSchema(ctx, s.db, rebuildSchema, true); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(s.dbURL)
	if err != nil {
		return nil, err
	}
	if err := projection.InSchema(cfg, rebuildSchema); err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer pool.Close()
	if err := projection.Migrate(ctx, pool); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	store := projection.New(pool)
	const batch = 2000
	var b []projection.Applied
	for i, le := range l.Events {
		b = append(b, projection.Applied{Partition: le.Partition, Offset: le.Offset, Event: le.Event})
		if len(b) == batch || i == len(l.Events)-1 {
			if err := store.Apply(ctx, s.topics.Changes, b); err != nil {
				return nil, fmt.Errorf("rebuild: %w", err)
			}
			b = b[:0]
		}
	}
	// The live projector stores offsets past transaction markers; so does
	// the rebuild, up to the last stable offset it read to.
	for p, end := range l.End {
		if end > 0 {
			b = append(b, projection.Applied{Partition: p, Offset: end - 1, Marker: true})
		}
	}
	if err := store.Apply(ctx, s.topics.Changes, b); err != nil {
		return nil, fmt.Errorf("rebuild: %w", err)
	}
	return projection.Compare(ctx, s.db, rebuildSchema, "public", s.topics.Changes, 20)
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
