package projection

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Ready reports whether a read of the projection would be served now: in
// a transaction of its own it takes the lock every read takes (ACCESS
// SHARE) on each table the writer and the projector read, waiting at most
// a second, and reads no row. A ping (SELECT 1) answers while a lock
// held on a table (an ALTER TABLE's, a VACUUM FULL's, an operator's
// LOCK) stalls every read of it, and so every request; this waits behind
// such a lock as the reads do, so /readyz tells it. Errors are
// *events.Error (translate), with the driver's in their text for logs.
func (s *Store) Ready(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = 1000`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `LOCK TABLE kv_entries, kv_history, kv_elements, kv_fields, projector_offsets, writer_owners IN ACCESS SHARE MODE`)
		return err
	})
	return translate("ready", err)
}
