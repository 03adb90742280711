package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/projection"
)

// DefaultPostgresURL is the admin URL used when ESKV_TEST_POSTGRES_URL is
// unset: the machine's Postgres, trust auth.
const DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Postgres is a fresh, migrated database that lives as long as a test.
type Postgres struct {
	// Pool is connected to the database; it is closed at cleanup.
	Pool *pgxpool.Pool
	// URL is the database's connection URL, for processes under test.
	URL string
	// Name is the database name, eskv_t_<random>.
	Name string
}

// MustPostgres creates a fresh database with the projection schema
// (projection.Migrate) and returns a pool on it; the database is dropped
// when the test ends. Its URL is pool.Config().ConnString(), or use
// MustPostgresDB for both. See MustPostgresDB for the environment.
func MustPostgres(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	return MustPostgresDB(tb).Pool
}

// MustPostgresDB creates a database eskv_t_<random> through the admin URL
// in ESKV_TEST_POSTGRES_URL (default DefaultPostgresURL), migrates it,
// and drops it (WITH (FORCE)) when the test ends. When Postgres cannot be
// reached the test fails, naming the URL and how to start it; with
// ESKV_UNIT_ONLY=1 it is skipped instead.
func MustPostgresDB(tb testing.TB) *Postgres {
	tb.Helper()
	adminURL := envOr("ESKV_TEST_POSTGRES_URL", DefaultPostgresURL)
	// Copied from a migrated template (pgtemplate.go); migrating the copy
	// then finds nothing to do.
	tpl, err := migratedTemplate(adminURL)
	if err != nil {
		tb.Logf("no migrated template database on %s (each test migrates its own): %v", adminURL, err)
	}
	return mustPostgresFrom(tb, adminURL, tpl)
}

// mustPostgresFrom is MustPostgresDB with the database copied from
// template ("": created empty), then migrated.
func mustPostgresFrom(tb testing.TB, adminURL, template string) *Postgres {
	tb.Helper()
	name := mustDatabase(tb, server{
		template:   template,
		name:       "Postgres",
		addr:       adminURL,
		env:        "ESKV_TEST_POSTGRES_URL",
		start:      "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
		point:      "another server (admin rights to create databases)",
		dropSuffix: " WITH (FORCE)",
		admin: func(ctx context.Context) (func(context.Context, string) error, func(), error) {
			c, err := pgx.Connect(ctx, adminURL)
			if err != nil {
				return nil, nil, err
			}
			exec := func(ctx context.Context, sql string) error { _, err := c.Exec(ctx, sql); return err }
			return exec, func() { c.Close(context.Background()) }, nil
		},
	})
	dbURL, err := projection.WithDatabase(adminURL, name)
	if err != nil {
		tb.Fatalf("database URL from %s: %v", adminURL, err)
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		tb.Fatalf("connect %s: %v", dbURL, err)
	}
	pool := mustMigratedPool(tb, cfg, name)
	return &Postgres{Pool: pool, URL: dbURL, Name: name}
}

// MustSchema creates schema in the database, migrates it and returns a
// pool whose connections work in it, closed when the test ends.
func (pg *Postgres) MustSchema(tb testing.TB, schema string) *pgxpool.Pool {
	tb.Helper()
	if _, err := projection.CreateSchema(context.Background(), pg.Pool, schema, false); err != nil {
		tb.Fatalf("create schema %s: %v", schema, err)
	}
	cfg, err := pgxpool.ParseConfig(pg.URL)
	if err != nil {
		tb.Fatal(err)
	}
	if err := projection.InSchema(cfg, schema); err != nil {
		tb.Fatal(err)
	}
	return mustMigratedPool(tb, cfg, schema)
}

// mustMigratedPool opens a pool with cfg, closed at cleanup (before the
// database is dropped: cleanups run last-in first-out), and applies the
// projection schema (projection.Migrate) to where it works: the database
// or schema named where.
func mustMigratedPool(tb testing.TB, cfg *pgxpool.Config, where string) *pgxpool.Pool {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		tb.Fatalf("connect %s: %v", cfg.ConnString(), err)
	}
	tb.Cleanup(pool.Close)
	if err := projection.Migrate(ctx, pool); err != nil {
		tb.Fatalf("migrate %s: %v", where, err)
	}
	return pool
}

// Lock takes an ACCESS EXCLUSIVE lock on tables in a transaction of its
// own and holds it until release (or the test's end): every statement on
// them waits meanwhile, while Postgres itself answers — a stalled
// projection, not a stopped server.
func (p *Postgres) Lock(tb testing.TB, tables ...string) (release func()) {
	tb.Helper()
	tx, err := p.Pool.Begin(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), "LOCK TABLE "+strings.Join(tables, ", ")+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		_ = tx.Rollback(context.Background())
		tb.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := tx.Rollback(context.Background()); err != nil {
				tb.Errorf("release the lock on %v: %v", tables, err)
			}
		})
	}
	tb.Cleanup(release)
	return release
}
