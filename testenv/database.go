package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"
)

// server is a database server on which each test gets a database of its
// own: Postgres or ClickHouse.
type server struct {
	name string // as messages name it: "Postgres"
	addr string // the admin URL or address, from env or its default
	env  string // the variable that points tests at another server
	// start says how to start the server; point, what another server
	// needs.
	start, point string
	// dropSuffix follows "DROP DATABASE IF EXISTS <name>".
	dropSuffix string
	// template, when set, is the database a test's is copied from
	// (CREATE DATABASE … TEMPLATE, Postgres): when the copy fails, the
	// test's database is created empty.
	template string
	// admin opens an administrative session: exec runs one statement.
	admin func(ctx context.Context) (exec func(context.Context, string) error, closeFn func(), err error)
}

// envOr returns the value of the environment variable key, or def when
// it is unset or empty.
func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// mustDatabase creates a database eskv_t_<random> on srv and drops it when
// the test ends; cleanups the caller registers afterwards (closing its
// connections) run before the drop. When the server cannot be reached
// the test fails, naming the server and how to start it; with
// ESKV_UNIT_ONLY=1 (and CI not "true") it is skipped instead.
func mustDatabase(tb testing.TB, srv server) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	exec, closeAdmin, err := srv.admin(ctx)
	if err != nil {
		srv.unreachable(tb, err)
	}
	defer closeAdmin()

	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		tb.Fatalf("random database name: %v", err)
	}
	name := "eskv_t_" + hex.EncodeToString(rnd[:])
	create := "CREATE DATABASE " + name
	if srv.template != "" {
		if err := exec(ctx, create+" TEMPLATE "+srv.template); err != nil {
			tb.Logf("create database %s from %s on %s: %v; creating it empty", name, srv.template, srv.name, err)
		} else {
			create = ""
		}
	}
	if create != "" {
		if err := exec(ctx, create); err != nil {
			tb.Fatalf("create database %s on %s %s: %v", name, srv.name, srv.addr, err)
		}
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		exec, closeAdmin, err := srv.admin(ctx)
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer closeAdmin()
		if err := exec(ctx, "DROP DATABASE IF EXISTS "+name+srv.dropSuffix); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	return name
}

func (srv server) unreachable(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("ESKV_UNIT_ONLY") == "1" && os.Getenv("CI") != "true" {
		tb.Skipf("ESKV_UNIT_ONLY=1 and %s at %s is unreachable: %v", srv.name, srv.addr, err)
	}
	tb.Fatalf("%s at %s is unreachable: %v\n"+
		"start it with: %s\n"+
		"or point %s at %s; "+
		"ESKV_UNIT_ONLY=1 skips tests that need it", srv.name, srv.addr, err, srv.start, srv.env, srv.point)
}
