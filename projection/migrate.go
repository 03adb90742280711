package projection

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/eskv/eskv/schemas"
)

// migrationLockID is the Postgres advisory lock held while migrating, so
// that the writer and the projector can both migrate at start: the second
// waits for the first and then finds nothing to do.
const migrationLockID int64 = 0x65736b76 // "eskv"

// Migrate applies the embedded migrations of schemas/postgres that the
// database has not seen yet. It holds a session advisory lock meanwhile,
// so concurrent callers are safe. It needs two connections of the pool
// (one holds the lock and migrates, database/sql may open another).
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return migrate(ctx, pool, 0)
}

// migrate is Migrate up to the migration numbered upTo (0: all of them).
func migrate(ctx context.Context, pool *pgxpool.Pool, upTo int64) error {
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()

	migrations, err := fs.Sub(schemas.Postgres, "postgres")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// Retry the lock every second for up to five minutes.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID), lock.WithLockTimeout(1, 300))
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if upTo == 0 {
		_, err = p.Up(ctx)
	} else {
		_, err = p.UpTo(ctx, upTo)
	}
	return translate("migrate", err)
}
