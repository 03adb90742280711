package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

// rebuildCmd folds the compacted changes topic into a fresh schema.
func rebuildCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c config
	var into string
	var replace bool
	var batch int
	var format projection.HistoryFormat
	fs := newFlags("rebuild", &c, slog.LevelWarn, stderr)
	// The arguments of one run: no variable sets them.
	arg := fs.Arguments()
	arg.StringVar(&into, "into", "", "schema to rebuild into (required): created when missing, refused when it holds anything (see -replace)")
	arg.BoolVar(&replace, "replace", false, "drop the -into schema with everything in it first (never the schema of -postgres-url)")
	arg.IntVar(&batch, "batch", projector.DefaultMaxBatch, "events applied per Postgres transaction")
	checkFormat := historyFormat(fs, &format)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	// projector.RebuildConfig takes 0 for its default: refused here.
	if err := errors.Join(checkFormat(), fs.Positive("batch")); err != nil {
		return err
	}
	if into == "" {
		fs.Usage()
		return errors.New("rebuild: -into SCHEMA is required")
	}
	if err := projection.CheckSchemaName(into); err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	pool, err := c.postgres.Open(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()

	created, err := projection.CreateSchema(ctx, pool, into, replace)
	if errors.Is(err, projection.ErrSchemaNotEmpty) {
		return fmt.Errorf("rebuild: %w; pass -replace to drop it and rebuild", err)
	}
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	st, keys, err := rebuildInto(ctx, &c, rebuildTarget{schema: into, batch: batch, format: format}, c.logger(stderr))
	if err != nil {
		if created {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if derr := projection.DropSchema(dctx, pool, into); derr != nil {
				return fmt.Errorf("%w (and dropping the partial schema %s failed: %v)", err, into, derr)
			}
			return fmt.Errorf("%w (the partial schema %s was dropped)", err, into)
		}
		return fmt.Errorf("%w (schema %s holds a partial rebuild: run again with -replace)", err, into)
	}
	fmt.Fprintf(stdout, "rebuilt %s into schema %s: %d events read from %d partitions (log start to the last stable offsets taken at start), %d keys, in %s\n",
		c.kafka.Topic, into, st.Events, len(st.Ends), keys, st.Took.Round(time.Millisecond))
	return nil
}

// rebuildTarget is where and how rebuildInto folds the log: into schema
// (which must exist), batch events per transaction, kv_history's rows in
// format, up to ends (nil: the last stable offsets).
type rebuildTarget struct {
	schema string
	batch  int
	format projection.HistoryFormat
	ends   map[int32]int64
}

// rebuildInto migrates t.schema and folds the topic into it with
// projector.Rebuild. It returns the rebuild's figures and the number of
// keys rebuilt.
func rebuildInto(ctx context.Context, c *config, t rebuildTarget, log *slog.Logger) (projector.RebuildStats, int64, error) {
	schema, batch, format, ends := t.schema, t.batch, t.format, t.ends
	pool, err := schemaPool(ctx, c.postgres.URL, schema)
	if err != nil {
		return projector.RebuildStats{}, 0, err
	}
	defer pool.Close()
	if err := projection.Migrate(ctx, pool); err != nil {
		return projector.RebuildStats{}, 0, fmt.Errorf("rebuild: %w", err)
	}
	store := projection.New(pool)
	store.SetHistoryFormat(format)
	st, err := projector.Rebuild(ctx, projector.RebuildConfig{
		Brokers:    c.kafka.BrokerList(),
		Kafka:      c.kafka.Conn(),
		Topic:      c.kafka.Topic,
		Partitions: int32(c.kafka.Partitions),
		MaxBatch:   batch,
		Ends:       ends,
	}, store, log)
	if err != nil {
		return st, 0, err
	}
	// Its commits were asynchronous (schemaPool): one synchronous commit
	// after them flushes the WAL up to it, so that what the rebuild says
	// it did survives a crash of Postgres.
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on; SELECT pg_current_xact_id()`)
		return err
	}); err != nil {
		return st, 0, fmt.Errorf("rebuild: flush: %w", err)
	}
	var keys int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "kv_entries"}.Sanitize()).Scan(&keys); err != nil {
		return st, 0, fmt.Errorf("rebuild: count keys: %w", err)
	}
	return st, keys, nil
}

// schemaPool connects to url with every connection working in schema,
// for a rebuild: its commits do not wait for the WAL flush
// (synchronous_commit off: a rebuild that a crash interrupts is run
// again, into a replaced schema, so no commit of it needs to be durable
// on its own).
func schemaPool(ctx context.Context, url, schema string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err := projection.InSchema(cfg, schema); err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}
