package projection

import (
	"context"
	"time"
)

// Activity is what the status page's overview shows of a project's
// writes: the events projected since a time and the time of its last
// change.
type Activity struct {
	// Writes counts the events (versions of kv_history) of keys in the
	// range stamped at or after the time asked.
	Writes int64
	// LastChange is the newest updated_at of the range's entries, live or
	// not (a delete or an expiry is a change); zero when none.
	LastChange time.Time
}

// activityWritesSQL counts a partition's events since $2 in the key range
// [$3, $4): a walk of kv_history_partition_ts over the last minutes of
// the partition, whatever the size of the project. activityLastSQL reads
// the range's newest change from kv_entries (one row per key ever written).
const (
	activityWritesSQL = `SELECT count(*) FROM kv_history
    WHERE partition = $1 AND ts >= $2 AND key >= $3 AND key < $4`
	activityLastSQL = `SELECT max(updated_at) FROM kv_entries WHERE key >= $1 AND key < $2`
)

// Activity reads the writes since since and the last change of the keys
// in r, all of which live in partition (a project's keys share one).
func (s *Store) Activity(ctx context.Context, r KeyRange, partition int32, since time.Time) (Activity, error) {
	var a Activity
	if !ascii(r.Lo) || !ascii(r.Hi) || r.Lo >= r.Hi {
		return a, nil
	}
	if err := s.pool.QueryRow(ctx, activityWritesSQL, partition, since, r.Lo, r.Hi).Scan(&a.Writes); err != nil {
		return a, translate("activity", err)
	}
	var last *time.Time
	if err := s.pool.QueryRow(ctx, activityLastSQL, r.Lo, r.Hi).Scan(&last); err != nil {
		return a, translate("activity", err)
	}
	if last != nil {
		a.LastChange = last.UTC()
	}
	return a, nil
}
