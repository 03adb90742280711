package projection

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// EndUISessions records that the status page sessions of the token
// reference ref made until at, or until now by the database's clock if
// later, are ended (ui_logouts), and returns the time they are ended
// until. The rows of other tokens older than keep are deleted on the way:
// the sessions they end have all reached their end.
func (s *Store) EndUISessions(ctx context.Context, ref []byte, at time.Time, keep time.Duration) (time.Time, error) {
	var until time.Time
	err := s.pool.QueryRow(ctx, `
WITH gone AS (
    DELETE FROM ui_logouts WHERE token_ref <> $1 AND ended_until < clock_timestamp() - $3 * interval '1 microsecond'
)
INSERT INTO ui_logouts (token_ref, ended_until) VALUES ($1, greatest($2::timestamptz, clock_timestamp()))
ON CONFLICT (token_ref) DO UPDATE SET ended_until = greatest(ui_logouts.ended_until, excluded.ended_until)
RETURNING ended_until`, ref, at, keep.Microseconds()).Scan(&until)
	return until, translate("end ui sessions", err)
}

// UISessionsEnded returns the time the status page sessions of ref are
// ended until, or the zero time.
func (s *Store) UISessionsEnded(ctx context.Context, ref []byte) (time.Time, error) {
	var until time.Time
	err := s.pool.QueryRow(ctx, `SELECT ended_until FROM ui_logouts WHERE token_ref = $1`, ref).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	return until, translate("ui sessions ended", err)
}
