package main

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/tools/internal/localstack"
)

// pgMaxConns bounds the plain-table peer's pool: the local server's
// max_connections (100) is shared with eskv's own stack and with tests.
const pgMaxConns = 32

// pgTarget is a plain Postgres table on the local server (a database of
// its own), the compare-and-swap one UPDATE conditioned on the version.
type pgTarget struct {
	adminURL string
	db       string
	pool     *pgxpool.Pool
}

func startPostgresPeer(ctx context.Context, pc peerConfig) (_ system, err error) {
	t := &pgTarget{adminURL: pc.adminPostgresURL, db: "eskvbench_peer_" + localstack.RandomHex(6)}
	admin, err := pgx.Connect(ctx, t.adminURL)
	if err != nil {
		return system{}, fmt.Errorf("postgres at %s: %w", t.adminURL, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	var version string
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		return system{}, fmt.Errorf("postgres version: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+t.db); err != nil {
		return system{}, fmt.Errorf("create database %s: %w", t.db, err)
	}
	defer func() {
		if err != nil {
			t.close()
		}
	}()
	url, err := projection.WithDatabase(t.adminURL, t.db)
	if err != nil {
		return system{}, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return system{}, err
	}
	cfg.MaxConns = int32(min(pc.clients, pgMaxConns))
	if t.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return system{}, fmt.Errorf("connect %s: %w", t.db, err)
	}
	if _, err := t.pool.Exec(ctx, `CREATE TABLE kv (key text PRIMARY KEY, value text NOT NULL, version bigint NOT NULL)`); err != nil {
		return system{}, fmt.Errorf("create table: %w", err)
	}
	db, self := t.db, os.Getpid()
	classify := func(p procInfo) string {
		if p.PID == self {
			return kindLoadGenerator
		}
		return postgresKind(p, db)
	}
	return system{name: "postgres", version: versionOf(version), target: t, classify: classify}, nil
}

func (t *pgTarget) setup(ctx context.Context, keys []string) error {
	_, err := t.pool.Exec(ctx, `INSERT INTO kv (key, value, version) SELECT k, '{"seq":0}', 1 FROM unnest($1::text[]) AS k`, keys)
	if err != nil {
		return fmt.Errorf("insert keys: %w", err)
	}
	return nil
}

func (t *pgTarget) read(ctx context.Context, key string) ([]byte, int64, error) {
	var val []byte
	var rev int64
	err := t.pool.QueryRow(ctx, `SELECT value, version FROM kv WHERE key = $1`, key).Scan(&val, &rev)
	return val, rev, err
}

func (t *pgTarget) cas(ctx context.Context, key string, val []byte, rev int64) (bool, error) {
	tag, err := t.pool.Exec(ctx, `UPDATE kv SET value = $1, version = version + 1 WHERE key = $2 AND version = $3`, string(val), key, rev)
	return tag.RowsAffected() == 1, err
}

// close closes the pool and drops the database.
func (t *pgTarget) close() {
	if t.pool != nil {
		t.pool.Close()
	}
	ctx := context.Background()
	if c, err := pgx.Connect(ctx, t.adminURL); err == nil {
		_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+t.db+" WITH (FORCE)")
		c.Close(ctx)
	}
}
