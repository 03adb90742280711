package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/testenv"
)

func testKey(tb testing.TB) audit.HMACKey {
	tb.Helper()
	k, err := audit.ParseKey("test:000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// mustStore is a migrated audit store in a fresh ClickHouse database.
func mustStore(tb testing.TB) (*audit.Store, *testenv.ClickHouse) {
	tb.Helper()
	ch := testenv.MustClickHouse(tb)
	s := audit.NewStore(ch.Conn)
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s, ch
}

func event(key string, version int64, before, after string, ts time.Time) *events.Event {
	return &events.Event{
		SchemaVersion: 1, Key: key, Scope: key[:len("tenant/t/project/p")], Version: version, PrevVersion: version - 1,
		Kind: events.KindPut, Op: events.OpSet, Before: json.RawMessage(before), After: json.RawMessage(after),
		Semantics: events.Semantics{Purpose: "checkpoint", ConsumerHints: []string{"a", "b"}},
		Principal: "p", TS: ts, CreatedAt: ts,
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	s, ch := mustStore(t)
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var n uint64
	if err := ch.Conn.QueryRow(context.Background(), "SELECT count() FROM audit_schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("audit_schema_migrations has %d rows, want 1", n)
	}
}

func TestInsertAndLookUpChainHashes(t *testing.T) {
	s, ch := mustStore(t)
	ctx := context.Background()
	k := testKey(t)
	ts := time.Date(2026, 3, 4, 5, 6, 7, 891011000, time.UTC)
	var rows []audit.Row
	prev := ""
	for v := int64(1); v <= 3; v++ {
		r := audit.EventRow(event("tenant/t/project/p/a", v, fmt.Sprint(v-1), fmt.Sprint(v), ts), 0, v, k, prev)
		prev = r.ChainHash
		rows = append(rows, r)
	}
	// A replay inserts the same rows again.
	for range 2 {
		if err := s.InsertEvents(ctx, rows, time.Now()); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("FinalHasOneRowPerVersion", func(t *testing.T) {
		var raw, final uint64
		if err := ch.Conn.QueryRow(ctx, "SELECT count() FROM audit_events").Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := ch.Conn.QueryRow(ctx, "SELECT count() FROM audit_events FINAL").Scan(&final); err != nil {
			t.Fatal(err)
		}
		if raw != 6 || final != 3 {
			t.Fatalf("rows %d, FINAL %d; want 6 and 3", raw, final)
		}
	})
	t.Run("RoundTrip", func(t *testing.T) {
		var (
			tsUS  int64
			hints []string
			chain string
			when  time.Time
		)
		if err := ch.Conn.QueryRow(ctx, "SELECT ts, ts_us, consumer_hints, chain_hash FROM audit_events WHERE key = ? AND version = 2 LIMIT 1",
			"tenant/t/project/p/a").Scan(&when, &tsUS, &hints, &chain); err != nil {
			t.Fatal(err)
		}
		if tsUS != ts.UnixMicro() || !when.Equal(ts.Truncate(time.Second)) || len(hints) != 2 || chain != rows[1].ChainHash {
			t.Fatalf("read back ts %v ts_us %d hints %v chain %s", when, tsUS, hints, chain)
		}
	})
	t.Run("ChainHashes", func(t *testing.T) {
		got, err := s.ChainHashes(ctx, []audit.KeyVersion{{Key: "tenant/t/project/p/a", Version: 2}, {Key: "tenant/t/project/p/none", Version: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[audit.KeyVersion{Key: "tenant/t/project/p/a", Version: 2}] != rows[1].ChainHash {
			t.Fatalf("ChainHashes = %v", got)
		}
	})
}
