package projection

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
)

// A projection lives in one Postgres schema: the first of its pool's
// search_path, public by default. Migrate, New and every Store method use
// unqualified table names, so a pool whose connections start with another
// search_path (InSchema) reads and writes a projection in that schema with
// no other change. Rebuilds fold the log into a schema of their own this
// way, and Diff compares two schemas.

// ErrSchemaNotEmpty means a rebuild's target schema already holds
// objects: rebuilding into it would mix two projections.
var ErrSchemaNotEmpty = errors.New("schema exists and is not empty")

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// CheckSchemaName accepts the schema names a rebuild may create or drop:
// lowercase a-z, 0-9 and _, not starting with a digit, at most 63 bytes,
// and not a system schema (pg_*, information_schema).
func CheckSchemaName(name string) error {
	if !schemaName.MatchString(name) {
		return contract.FieldErrorf(contract.EInvalid, "schema",
			"schema name %q: want lowercase letters, digits and _, not starting with a digit, at most 63 characters", name)
	}
	if strings.HasPrefix(name, "pg_") || name == "information_schema" {
		return contract.FieldErrorf(contract.EInvalid, "schema", "schema name %q is a system schema", name)
	}
	return nil
}

// InSchema makes every connection of a pool built from cfg work in
// schema: its search_path is set to that schema alone when the connection
// starts (overriding one given in the connection string), so Migrate and
// the Store find and create their tables there.
func InSchema(cfg *pgxpool.Config, schema string) error {
	if err := CheckSchemaName(schema); err != nil {
		return err
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{schema}.Sanitize()
	return nil
}

// CurrentSchema returns the schema the pool's connections work in (where
// the projection of a Store on pool lives).
func CurrentSchema(ctx context.Context, pool *pgxpool.Pool) (string, error) {
	var s *string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&s); err != nil {
		return "", translate("current schema", err)
	}
	if s == nil {
		return "", &contract.Error{Code: contract.EInternal, Message: "projection: current schema: no schema of the search_path exists"}
	}
	return *s, nil
}

// CreateSchema creates schema for a rebuild. An existing empty schema is
// used as it is; one holding tables, views, sequences or functions is
// refused with ErrSchemaNotEmpty, unless replace, which drops it with
// everything in it first. The schema the pool itself works in (the live
// projection) is always refused. created reports that the schema did not
// exist before (or was replaced).
func CreateSchema(ctx context.Context, pool *pgxpool.Pool, schema string, replace bool) (created bool, err error) {
	if err := CheckSchemaName(schema); err != nil {
		return false, err
	}
	if err := notCurrent(ctx, pool, schema, "rebuild into"); err != nil {
		return false, err
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var exists bool
		var objects int64
		if err := tx.QueryRow(ctx, `
SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1),
    (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1) +
    (SELECT count(*) FROM pg_proc f JOIN pg_namespace n ON n.oid = f.pronamespace WHERE n.nspname = $1)`,
			schema).Scan(&exists, &objects); err != nil {
			return err
		}
		id := pgx.Identifier{schema}.Sanitize()
		switch {
		case exists && objects > 0 && !replace:
			return fmt.Errorf("%w: %s holds %d objects", ErrSchemaNotEmpty, schema, objects)
		case exists && !replace:
			return nil
		case exists:
			if _, err := tx.Exec(ctx, `DROP SCHEMA `+id+` CASCADE`); err != nil {
				return err
			}
		}
		created = true
		_, err := tx.Exec(ctx, `CREATE SCHEMA `+id)
		return err
	})
	if errors.Is(err, ErrSchemaNotEmpty) {
		return false, fmt.Errorf("projection: create schema: %w", err)
	}
	return created, translate("create schema "+schema, err)
}

// DropSchema drops schema and everything in it, if it exists. The schema
// the pool itself works in is refused.
func DropSchema(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if err := CheckSchemaName(schema); err != nil {
		return err
	}
	if err := notCurrent(ctx, pool, schema, "drop"); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
	return translate("drop schema "+schema, err)
}

func notCurrent(ctx context.Context, pool *pgxpool.Pool, schema, what string) error {
	cur, err := CurrentSchema(ctx, pool)
	if err != nil {
		return err
	}
	if cur == schema {
		return contract.FieldErrorf(contract.EInvalid, "schema",
			"refusing to %s schema %q: it is the schema of the live projection", what, schema)
	}
	return nil
}

// OffsetsIn returns the stored next offsets per partition of topic of the
// projection in schema (Store.Offsets of a pool in that schema).
func OffsetsIn(ctx context.Context, pool *pgxpool.Pool, schema, topic string) (map[int32]int64, error) {
	out, err := readOffsets(ctx, pool, pgx.Identifier{schema, "projector_offsets"}.Sanitize(), topic)
	return out, translate("offsets of "+schema, err)
}
