package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
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
	adminURL := os.Getenv("ESKV_TEST_POSTGRES_URL")
	if adminURL == "" {
		adminURL = DefaultPostgresURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		unreachable(tb, adminURL, err)
	}
	defer admin.Close(context.Background())

	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		tb.Fatalf("random database name: %v", err)
	}
	name := "eskv_t_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database %s on %s: %v", name, adminURL, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminURL)
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})

	dbURL, err := withDatabase(adminURL, name)
	if err != nil {
		tb.Fatalf("database URL from %s: %v", adminURL, err)
	}
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		tb.Fatalf("connect %s: %v", dbURL, err)
	}
	tb.Cleanup(pool.Close) // runs before the drop: cleanups run last-in first-out
	if err := projection.Migrate(ctx, pool); err != nil {
		tb.Fatalf("migrate %s: %v", name, err)
	}
	return &Postgres{Pool: pool, URL: dbURL, Name: name}
}

func unreachable(tb testing.TB, adminURL string, err error) {
	tb.Helper()
	if os.Getenv("ESKV_UNIT_ONLY") == "1" && os.Getenv("CI") != "true" {
		tb.Skipf("ESKV_UNIT_ONLY=1 and Postgres at %s is unreachable: %v", adminURL, err)
	}
	tb.Fatalf("Postgres at %s is unreachable: %v\n"+
		"start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start\n"+
		"or point ESKV_TEST_POSTGRES_URL at another server (admin rights to create databases); "+
		"ESKV_UNIT_ONLY=1 skips tests that need it", adminURL, err)
}

// withDatabase returns the connection string u with its database replaced
// by name. u is a postgres:// URL or a keyword/value string.
func withDatabase(u, name string) (string, error) {
	if strings.HasPrefix(u, "postgres://") || strings.HasPrefix(u, "postgresql://") {
		pu, err := url.Parse(u)
		if err != nil {
			return "", err
		}
		pu.Path = "/" + name
		return pu.String(), nil
	}
	return u + " dbname=" + name, nil
}
