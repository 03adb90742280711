package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultClickHouseAddr is the native-protocol address used when
// ESKV_TEST_CLICKHOUSE_ADDR is unset: the server that
// scripts/ensure-clickhouse.sh starts.
const DefaultClickHouseAddr = "127.0.0.1:19000"

// ClickHouseHTTPAddr is the HTTP address of the tests' ClickHouse:
// ESKV_TEST_CLICKHOUSE_HTTP_ADDR, default 127.0.0.1:18123 (the server
// scripts/ensure-clickhouse.sh starts).
func ClickHouseHTTPAddr() string { return envOr("ESKV_TEST_CLICKHOUSE_HTTP_ADDR", "127.0.0.1:18123") }

// ClickHouse is a fresh, empty database that lives as long as a test.
type ClickHouse struct {
	// Conn is connected with Database as its default database; it is
	// closed at cleanup.
	Conn driver.Conn
	// Addr is the server's native-protocol address, for processes under
	// test.
	Addr string
	// Database is the database name, eskv_t_<random>.
	Database string
}

// MustClickHouse creates a database eskv_t_<random> on the ClickHouse at
// ESKV_TEST_CLICKHOUSE_ADDR (default DefaultClickHouseAddr, user default
// without password) and drops it when the test ends. The database is
// empty: apply the audit DDL with audit.Migrate. When ClickHouse cannot be
// reached the test fails, naming the address and how to start it; with
// ESKV_UNIT_ONLY=1 (and CI not "true") it is skipped instead.
func MustClickHouse(tb testing.TB) *ClickHouse {
	tb.Helper()
	addr := envOr("ESKV_TEST_CLICKHOUSE_ADDR", DefaultClickHouseAddr)
	name := mustDatabase(tb, server{
		name:  "ClickHouse",
		addr:  addr,
		env:   "ESKV_TEST_CLICKHOUSE_ADDR",
		start: "bash scripts/ensure-clickhouse.sh (installs Debian's clickhouse-server if needed)",
		point: "another server's native port (rights to create databases)",
		admin: func(ctx context.Context) (func(context.Context, string) error, func(), error) {
			c, err := openClickHouse(addr, "default")
			if err == nil {
				err = c.Ping(ctx)
			}
			if err != nil {
				if c != nil {
					c.Close()
				}
				return nil, nil, err
			}
			exec := func(ctx context.Context, sql string) error { return c.Exec(ctx, sql) }
			return exec, func() { c.Close() }, nil
		},
	})
	conn, err := openClickHouse(addr, name)
	if err != nil {
		tb.Fatalf("connect to ClickHouse %s database %s: %v", addr, name, err)
	}
	tb.Cleanup(func() { conn.Close() }) // runs before the drop
	return &ClickHouse{Conn: conn, Addr: addr, Database: name}
}

func openClickHouse(addr, database string) (driver.Conn, error) {
	return clickhouse.Open(&clickhouse.Options{
		Addr:        []string{addr},
		Auth:        clickhouse.Auth{Database: database, Username: "default"},
		DialTimeout: 5 * time.Second,
		ReadTimeout: 60 * time.Second,
	})
}
