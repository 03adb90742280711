package audit

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Bucket is the time granularity of conflict rates.
type Bucket string

// Buckets of RateQuery.
const (
	Minute Bucket = "minute"
	Hour   Bucket = "hour"
	Total  Bucket = "total" // one bucket for the whole range, starting at From
)

// RateQuery selects conflict rates: events and conflicts with From <= ts <
// To, per Bucket, tenant, project and purpose; the non-empty filters
// restrict the groups.
type RateQuery struct {
	From, To time.Time
	Bucket   Bucket
	Tenant   string
	Project  string
	Purpose  string
}

// Rate is the conflict rate of one group in one bucket: Conflicts /
// (Conflicts + Applied), where Applied counts applied write requests: a
// put or delete, or a transaction once (TTL expirations are not writes),
// and Conflicts rejected ones, a transaction once.
type Rate struct {
	Bucket    time.Time `json:"bucket"`
	Tenant    string    `json:"tenant"`
	Project   string    `json:"project"`
	Purpose   string    `json:"purpose"`
	Applied   uint64    `json:"applied"`
	Conflicts uint64    `json:"conflicts"`
	Rate      float64   `json:"rate"`
}

// conflictRateSQL is the documented conflict-rate query (docs/audit.md):
// it counts distinct identities, so rows a replay inserted twice, merged
// or not yet, count once. It counts write requests: the rows of one
// transaction (one txn_id) are one applied write, and a rejected
// transaction is one conflict record. Denied writes (reason forbidden)
// are not conflicts and do not count. %[1]s is the bucket expression over
// ts, %[2]s extra conditions.
const conflictRateSQL = `SELECT bucket, tenant, project, purpose,
    sum(a) AS applied, sum(c) AS conflicts,
    if(sum(a) + sum(c) = 0, 0, sum(c) / (sum(a) + sum(c))) AS rate
FROM
(
    SELECT %[1]s AS bucket, tenant, project, purpose,
        uniqExact(if(txn_id = '', key, txn_id), if(txn_id = '', version, 0)) AS a, toUInt64(0) AS c
    FROM audit_events
    WHERE kind IN ('put', 'delete') AND ts >= toDateTime(?) AND ts < toDateTime(?)%[2]s
    GROUP BY bucket, tenant, project, purpose
    UNION ALL
    SELECT %[1]s AS bucket, tenant, project, purpose, toUInt64(0) AS a, uniqExact(key, conflict_id) AS c
    FROM audit_conflicts
    WHERE reason != 'forbidden' AND ts >= toDateTime(?) AND ts < toDateTime(?)%[2]s
    GROUP BY bucket, tenant, project, purpose
)
GROUP BY bucket, tenant, project, purpose
ORDER BY bucket, tenant, project, purpose`

// ConflictRates runs the conflict-rate query.
func (s *Store) ConflictRates(ctx context.Context, q RateQuery) ([]Rate, error) {
	var bucket string
	switch q.Bucket {
	case Minute, "":
		bucket = "toStartOfMinute(ts)"
	case Hour:
		bucket = "toStartOfHour(ts)"
	case Total:
		bucket = fmt.Sprintf("toDateTime(%d)", q.From.Unix())
	default:
		return nil, fmt.Errorf("conflict rates: unknown bucket %q (minute, hour or total)", q.Bucket)
	}
	var cond strings.Builder
	var filters []any
	for _, f := range []struct{ col, val string }{{"tenant", q.Tenant}, {"project", q.Project}, {"purpose", q.Purpose}} {
		if f.val != "" {
			cond.WriteString(" AND " + f.col + " = ?")
			filters = append(filters, f.val)
		}
	}
	args := append([]any{q.From.Unix(), q.To.Unix()}, filters...)
	args = append(args, q.From.Unix(), q.To.Unix())
	args = append(args, filters...)

	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, fmt.Sprintf(conflictRateSQL, bucket, cond.String()), args...)
	if err != nil {
		return nil, unavailable("conflict rates", err)
	}
	defer rows.Close()
	var out []Rate
	for rows.Next() {
		var r Rate
		if err := rows.Scan(&r.Bucket, &r.Tenant, &r.Project, &r.Purpose, &r.Applied, &r.Conflicts, &r.Rate); err != nil {
			return nil, fmt.Errorf("conflict rates: %w", err)
		}
		r.Bucket = r.Bucket.UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// KeyConflicts is one line of the top conflicting keys.
type KeyConflicts struct {
	Key          string    `json:"key"`
	Tenant       string    `json:"tenant"`
	Project      string    `json:"project"`
	Conflicts    uint64    `json:"conflicts"`
	LastConflict time.Time `json:"lastConflict"`
	Purposes     []string  `json:"purposes"`
}

// TopConflictingKeys returns the limit keys with the most conflicts with
// from <= ts < to, optionally of one tenant.
func (s *Store) TopConflictingKeys(ctx context.Context, from, to time.Time, tenant string, limit int) ([]KeyConflicts, error) {
	q := `SELECT key, tenant, project, uniqExact(conflict_id) AS conflicts, max(ts) AS last_conflict, groupUniqArray(purpose)
FROM audit_conflicts
WHERE reason != 'forbidden' AND ts >= toDateTime(?) AND ts < toDateTime(?)`
	args := []any{from.Unix(), to.Unix()}
	if tenant != "" {
		q += " AND tenant = ?"
		args = append(args, tenant)
	}
	q += fmt.Sprintf("\nGROUP BY key, tenant, project\nORDER BY conflicts DESC, key\nLIMIT %d", max(limit, 1))
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, q, args...)
	if err != nil {
		return nil, unavailable("top conflicting keys", err)
	}
	defer rows.Close()
	var out []KeyConflicts
	for rows.Next() {
		var k KeyConflicts
		if err := rows.Scan(&k.Key, &k.Tenant, &k.Project, &k.Conflicts, &k.LastConflict, &k.Purposes); err != nil {
			return nil, fmt.Errorf("top conflicting keys: %w", err)
		}
		k.LastConflict = k.LastConflict.UTC()
		out = append(out, k)
	}
	return out, rows.Err()
}

// Counts are distinct rows of the audit tables.
type Counts struct {
	Events, Conflicts uint64
}

// Count returns the distinct events and conflicts in the trail.
func (s *Store) Count(ctx context.Context) (Counts, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	var c Counts
	if err := s.conn.QueryRow(ctx, "SELECT uniqExact(key, version) FROM audit_events").Scan(&c.Events); err != nil {
		return c, unavailable("count events", err)
	}
	if err := s.conn.QueryRow(ctx, "SELECT uniqExact(key, conflict_id) FROM audit_conflicts").Scan(&c.Conflicts); err != nil {
		return c, unavailable("count conflicts", err)
	}
	return c, nil
}

// EventRowAt returns the row of (key, version), read with FINAL; ok is
// false when there is none.
func (s *Store) EventRowAt(ctx context.Context, key string, version int64) (r Row, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	rows, err := s.conn.Query(ctx, "SELECT "+strings.TrimSuffix(eventColumns, ", ingested_at")+
		" FROM audit_events FINAL WHERE key = ? AND version = ? LIMIT 1", key, version)
	if err != nil {
		return r, false, unavailable("read audit_events", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return r, false, rows.Err()
	}
	if r, _, err = scanRow(rows); err != nil {
		return r, false, err
	}
	return r, true, nil
}

// scanRow scans a row of eventColumns (without ingested_at); tsOK reports
// whether its column ts agrees with ts_us (the chain covers ts_us).
func scanRow(rows interface{ Scan(dest ...any) error }) (r Row, tsOK bool, err error) {
	var (
		ts     time.Time
		tsUS   int64
		scheme uint8
	)
	if err := rows.Scan(&ts, &tsUS, &r.Tenant, &r.Project, &r.Key, &r.Version, &r.PrevVersion, &r.Kind, &r.Op,
		&r.Purpose, &r.Producer, &r.ConsumerHints, &r.Principal, &r.Directive, &r.RequestID, &r.SpecRef, &r.TTLSeconds,
		&r.ExpiresAtUS, &r.BeforeHash, &r.AfterHash, &r.HashKeyID, &scheme, &r.PrevChainHash, &r.ChainHash,
		&r.Partition, &r.Offset, &r.TxnID, &r.TxnSize, &r.ElementOp, &r.ElementHash); err != nil {
		return r, false, fmt.Errorf("read audit_events: %w", err)
	}
	r.HashScheme = Scheme(scheme)
	r.TS = time.UnixMicro(tsUS).UTC()
	return r, ts.Unix() == r.TS.Truncate(time.Second).Unix(), nil
}

// KeyScope is the scope of exactly one key.
func KeyScope(key string) Scope { return Scope{From: key, To: key + "\x00"} }
