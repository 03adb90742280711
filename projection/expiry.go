package projection

import (
	"context"
	"time"
)

// Expiring is a live entry past its expiry, as the TTL sweeper sees it.
type Expiring struct {
	Key       string
	Version   int64
	ExpiresAt time.Time
}

// Expired returns up to limit live entries of partition p whose expiry is
// at or before now, oldest first: the TTL sweeper's work list, served by
// the index kv_entries_expiry.
func (s *Store) Expired(ctx context.Context, p int32, now time.Time, limit int) ([]Expiring, error) {
	rows, err := s.pool.Query(ctx, `
		SELECT key, version, expires_at FROM kv_entries
		WHERE partition = $1 AND live AND expires_at IS NOT NULL AND expires_at <= $2
		ORDER BY expires_at
		LIMIT $3`, p, now, limit)
	if err != nil {
		return nil, translate("expired", err)
	}
	defer rows.Close()
	var out []Expiring
	for rows.Next() {
		var e Expiring
		if err := rows.Scan(&e.Key, &e.Version, &e.ExpiresAt); err != nil {
			return nil, translate("expired", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, translate("expired", err)
	}
	return out, nil
}
