package logcheck

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/contract"
)

// Querier is the projection's database (a *pgxpool.Pool).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ProjectionFindings compare a projection with the log.
type ProjectionFindings struct {
	// FoldDiffs: keys whose kv_entries row differs from the key's last
	// event in the log (version, liveness, value), or rows of keys the
	// log does not have.
	FoldDiffs []string
	// NotCompared counts the kv_entries rows of events committed past
	// the end of the log as read (Log.End): a write decided after the
	// log was read (a sweeper's expiry, a round in flight), as
	// projector diff leaves out keys changed past the common offsets.
	NotCompared int
	// LostInProjection: acknowledged writes missing from kv_history.
	LostInProjection []string
}

// Projection compares the projection in db, which has stored every event
// of l, with the fold of l's events, and looks up every acknowledged
// write in kv_history. Rows at or past l.End of their partition are not
// compared (every row is when l.End is nil).
func Projection(ctx context.Context, db Querier, l *Log, acks []Acked) (ProjectionFindings, error) {
	var f ProjectionFindings
	last := map[string]contract.Event{}
	for _, le := range l.Events {
		if le.Event.Version > last[le.Event.Key].Version {
			last[le.Event.Key] = le.Event
		}
	}
	var err error
	if f.FoldDiffs, f.NotCompared, err = foldDiffs(ctx, db, last, l.End); err != nil {
		return f, fmt.Errorf("read kv_entries: %w", err)
	}
	if len(acks) == 0 {
		return f, nil
	}
	hist := map[string]string{}
	var (
		key   string
		ver   int64
		after []byte
	)
	rows, err := db.Query(ctx, `SELECT key, version, coalesce(event, event_text::jsonb)->'after' FROM kv_history`)
	if err == nil {
		_, err = pgx.ForEachRow(rows, []any{&key, &ver, &after}, func() error {
			hist[fmt.Sprintf("%s@%d", key, ver)] = string(after)
			return nil
		})
	}
	if err != nil {
		return f, fmt.Errorf("read kv_history: %w", err)
	}
	for _, a := range acks {
		got, ok := hist[fmt.Sprintf("%s@%d", a.Key, a.Version)]
		if !ok || !jsonEqual([]byte(got), a.Value) {
			f.LostInProjection = append(f.LostInProjection, fmt.Sprintf("%s: kv_history has %q", a, got))
		}
	}
	return f, nil
}

// foldDiffs compares kv_entries with the last event of every key; a row
// at or past end of its partition (when end is not nil) is only counted.
func foldDiffs(ctx context.Context, db Querier, last map[string]contract.Event, end map[int32]int64) (diffs []string, past int, err error) {
	var (
		key       string
		ver       int64
		live      bool
		value     *string
		partition int32
		offset    int64
	)
	rows, err := db.Query(ctx, `SELECT key, version, live, value, partition, kafka_offset FROM kv_entries`)
	if err != nil {
		return nil, 0, err
	}
	inRows := map[string]bool{}
	if _, err := pgx.ForEachRow(rows, []any{&key, &ver, &live, &value, &partition, &offset}, func() error {
		inRows[key] = true
		if e, bounded := end[partition]; bounded && offset >= e {
			past++
			return nil
		}
		e, ok := last[key]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s: in kv_entries (version %d) but not in the log", key, ver))
		case e.Version != ver || e.Live() != live:
			diffs = append(diffs, fmt.Sprintf("%s: kv_entries has version %d live %v, the log version %d live %v", key, ver, live, e.Version, e.Live()))
		case live && (value == nil || !jsonEqual([]byte(*value), e.After)):
			diffs = append(diffs, fmt.Sprintf("%s@%d: kv_entries has value %v, the log %s", key, ver, deref(value), e.After))
		}
		return nil
	}); err != nil {
		return nil, 0, err
	}
	for k, e := range last {
		if !inRows[k] {
			diffs = append(diffs, fmt.Sprintf("%s: version %d in the log, no kv_entries row", k, e.Version))
		}
	}
	return diffs, past, nil
}

func deref(s *string) string {
	if s == nil {
		return "NULL"
	}
	return *s
}
