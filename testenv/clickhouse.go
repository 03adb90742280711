package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultClickHouseAddr is the native-protocol address used when
// ESKV_TEST_CLICKHOUSE_ADDR is unset: the server that
// scripts/ensure-clickhouse.sh starts.
const DefaultClickHouseAddr = "127.0.0.1:19000"

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
	addr := os.Getenv("ESKV_TEST_CLICKHOUSE_ADDR")
	if addr == "" {
		addr = DefaultClickHouseAddr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	admin, err := openClickHouse(addr, "default")
	if err == nil {
		err = admin.Ping(ctx)
	}
	if err != nil {
		clickHouseUnreachable(tb, addr, err)
	}
	defer admin.Close()

	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		tb.Fatalf("random database name: %v", err)
	}
	name := "eskv_t_" + hex.EncodeToString(rnd[:])
	if err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database %s on ClickHouse %s: %v", name, addr, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := openClickHouse(addr, "default")
		if err != nil {
			tb.Errorf("drop database %s: %v", name, err)
			return
		}
		defer c.Close()
		if err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
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

func clickHouseUnreachable(tb testing.TB, addr string, err error) {
	tb.Helper()
	if os.Getenv("ESKV_UNIT_ONLY") == "1" && os.Getenv("CI") != "true" {
		tb.Skipf("ESKV_UNIT_ONLY=1 and ClickHouse at %s is unreachable: %v", addr, err)
	}
	tb.Fatalf("ClickHouse at %s is unreachable: %v\n"+
		"start it with: bash scripts/ensure-clickhouse.sh (installs Debian's clickhouse-server if needed)\n"+
		"or point ESKV_TEST_CLICKHOUSE_ADDR at another server's native port (rights to create databases); "+
		"ESKV_UNIT_ONLY=1 skips tests that need it", addr, err)
}
