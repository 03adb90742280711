package pgcluster_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/eskv/eskv/tools/internal/pgcluster"
)

// TestStart starts a cluster, checks it runs as production would
// (autovacuum on, pg_stat_statements in a new database), and that Close
// removes it.
func TestStart(t *testing.T) {
	ctx := context.Background()
	c, err := pgcluster.Start(ctx, "pgclustertest")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conn, err := pgx.Connect(ctx, c.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE pgcluster_db"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	db, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:"+strconv.Itoa(c.Port)+"/pgcluster_db?sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	var autovacuum string
	if err := db.QueryRow(ctx, "SHOW autovacuum").Scan(&autovacuum); err != nil || autovacuum != "on" {
		t.Fatalf("autovacuum = %q, %v; want on", autovacuum, err)
	}
	var calls int64
	if err := db.QueryRow(ctx, "SELECT count(*) FROM pg_stat_statements").Scan(&calls); err != nil {
		t.Fatalf("pg_stat_statements in a new database: %v", err)
	}
}
