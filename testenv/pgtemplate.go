package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/schemas"
)

// A test's Postgres database is a copy (CREATE DATABASE … TEMPLATE) of a
// database that holds the projection schema and nothing else: migrated
// once for every test binary on the server, instead of once a test (about
// 400 databases a make test, each 150–200 ms of migrations on a slow
// machine). The template is named by a hash of the migrations, so a
// changed migration makes a new one; the templates of other migrations
// are dropped then, unless in use. It stays on the server between runs
// (8 MB). Whatever goes wrong with the template, a test falls back to a
// database of its own migrated from scratch.

// templatePrefix names the templates: eskv_tpl_<hash of the migrations>.
const templatePrefix = "eskv_tpl_"

var template struct {
	once sync.Once
	name string
	err  error
}

// migratedTemplate returns the name of the migrated template database on
// the server at adminURL, building it when no test binary has yet.
func migratedTemplate(adminURL string) (string, error) {
	template.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		template.name, template.err = buildTemplate(ctx, adminURL)
	})
	return template.name, template.err
}

// buildTemplate creates and migrates the template when it is missing,
// under an advisory lock (the test binaries of make test run at once):
// it is migrated under another name and renamed once complete, so a
// template found is a whole one.
func buildTemplate(ctx context.Context, adminURL string) (string, error) {
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := templatePrefix + hash
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	exec := func(sql string, args ...any) error { _, err := c.Exec(ctx, sql, args...); return err }
	// One key for every template: the lock is held for a second or so.
	const lockKey = 0x65736b76_74706c // "eskvtpl"
	if err := exec("SELECT pg_advisory_lock($1)", lockKey); err != nil {
		return "", err
	}
	var exists bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", err
	}
	if exists {
		return name, nil
	}
	building := name + "_new"
	if err := exec("DROP DATABASE IF EXISTS " + building + " WITH (FORCE)"); err != nil { // a builder that died
		return "", err
	}
	if err := exec("CREATE DATABASE " + building); err != nil {
		return "", err
	}
	if err := migrateDatabase(ctx, adminURL, building); err != nil {
		_ = exec("DROP DATABASE IF EXISTS " + building + " WITH (FORCE)")
		return "", err
	}
	if err := exec("ALTER DATABASE " + building + " RENAME TO " + name); err != nil {
		return "", err
	}
	// The templates of other migrations: a test binary of another
	// checkout copying one now keeps it (the drop fails and is left for
	// later), and one that finds it gone falls back.
	rows, err := c.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE $1 AND datname <> $2", templatePrefix+"%", name)
	if err != nil {
		return name, nil
	}
	old, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return name, nil
	}
	for _, o := range old {
		_ = exec("DROP DATABASE IF EXISTS " + pgx.Identifier{o}.Sanitize())
	}
	return name, nil
}

// migrateDatabase applies the projection schema to the database name on
// the server at adminURL, and closes its connections.
func migrateDatabase(ctx context.Context, adminURL, name string) error {
	u, err := projection.WithDatabase(adminURL, name)
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, u)
	if err != nil {
		return err
	}
	defer pool.Close()
	return projection.Migrate(ctx, pool)
}

// migrationsHash is the first 16 hex digits of a SHA-256 of the
// migrations' names and contents.
func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(schemas.Postgres, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(schemas.Postgres, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}
