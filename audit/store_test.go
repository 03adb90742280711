package audit_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"testing"
	"time"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/schemas"
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

func event(key string, version int64, before, after string, ts time.Time) *contract.Event {
	return &contract.Event{
		SchemaVersion: 1, Key: key, Scope: key[:len("tenant/t/project/p")], Version: version, PrevVersion: version - 1,
		Kind: contract.KindPut, Op: contract.OpSet, Before: json.RawMessage(before), After: json.RawMessage(after),
		Semantics: contract.Semantics{Purpose: "checkpoint", ConsumerHints: []string{"a", "b"}},
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
	files, err := fs.Glob(schemas.ClickHouse, "clickhouse/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if n != uint64(len(files)) {
		t.Fatalf("audit_schema_migrations has %d rows, want %d", n, len(files))
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
		r := audit.EventRow(event("tenant/t/project/p/a", v, fmt.Sprint(v-1), fmt.Sprint(v), ts), audit.At{Partition: 0, Offset: v}, k, audit.CurrentScheme, prev)
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

// TestDirectiveRoundTrip: a row's directive is stored (migration 0006),
// read back, and chained: the row read back recomputes to its chain
// hash, and its conflict row keeps the directive too.
func TestDirectiveRoundTrip(t *testing.T) {
	s, _ := mustStore(t)
	ctx := context.Background()
	k := testKey(t)
	e := event("tenant/t/project/p/d", 1, "null", "1", time.Now().UTC())
	e.Principal, e.Directive = "harvester:sync-onedrive", "sync-onedrive"
	r := audit.EventRow(e, audit.At{Partition: 0, Offset: 1}, k, audit.CurrentScheme, "")
	if err := s.InsertEvents(ctx, []audit.Row{r}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.EventRowAt(ctx, e.Key, 1)
	if err != nil || !ok {
		t.Fatalf("EventRowAt: %v, %v", ok, err)
	}
	if got.Directive != "sync-onedrive" || audit.ChainHash(k, &got) != r.ChainHash {
		t.Fatalf("read back directive %q, chain hash recomputes to %s (written %s)", got.Directive, audit.ChainHash(k, &got), r.ChainHash)
	}
	got.Directive = ""
	if audit.ChainHash(k, &got) == r.ChainHash {
		t.Fatal("the chain hash does not cover the directive")
	}
}

// oldEventColumns are the columns of audit_events before hash_scheme.
const oldEventColumns = "ts, ts_us, tenant, project, key, version, prev_version, kind, op, purpose, producer, consumer_hints, " +
	"principal, request_id, spec_ref, ttl_seconds, expires_at_us, before_hash, after_hash, hash_key_id, " +
	"prev_chain_hash, chain_hash, kafka_partition, kafka_offset, ingested_at"

// mustOldTrail is a database as the auditor left it before migration
// 0002: 0001 applied and recorded, and one scheme-1 row of key, version 1.
// With interrupted, the first statement of 0002 ran too (and was not
// recorded).
func mustOldTrail(t *testing.T, key string, interrupted bool) (*testenv.ClickHouse, audit.Row) {
	t.Helper()
	ch := testenv.MustClickHouse(t)
	ctx := context.Background()
	ddl, err := schemas.ClickHouse.ReadFile("clickhouse/0001_audit.sql")
	if err != nil {
		t.Fatal(err)
	}
	stmts := append(audit.Statements(string(ddl)),
		"CREATE TABLE audit_schema_migrations (version UInt32, name String, applied_at DateTime) ENGINE = ReplacingMergeTree() ORDER BY version")
	if interrupted {
		next, err := schemas.ClickHouse.ReadFile("clickhouse/0002_hash_scheme.sql")
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, audit.Statements(string(next))[0])
	}
	for _, stmt := range stmts {
		if err := ch.Conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	r := audit.EventRow(event(key, 1, "null", `{"n":9007199254740993}`, time.Now().UTC()), audit.At{Partition: 0, Offset: 7}, testKey(t), audit.Scheme1, "")
	for q, row := range map[string][]any{
		"INSERT INTO audit_schema_migrations (version, name, applied_at)": {uint32(1), "0001_audit.sql", time.Now()},
		"INSERT INTO audit_events (" + oldEventColumns + ")": {r.TS, r.TS.UnixMicro(), r.Tenant, r.Project, r.Key, r.Version,
			r.PrevVersion, r.Kind, r.Op, r.Purpose, r.Producer, r.ConsumerHints, r.Principal, r.RequestID, r.SpecRef,
			r.TTLSeconds, r.ExpiresAtUS, r.BeforeHash, r.AfterHash, r.HashKeyID, r.PrevChainHash, r.ChainHash, r.Partition, r.Offset, time.Now()},
	} {
		b, err := ch.Conn.PrepareBatch(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Append(row...); err != nil {
			t.Fatal(err)
		}
		if err := b.Send(); err != nil {
			t.Fatal(err)
		}
	}
	return ch, r
}

// TestMigrateOldTrail: migration 0002 on a trail of the auditor before
// hash schemes (also after an interrupted run of 0002): its rows read as
// scheme 1 and still recompute to their chain hashes; new rows are
// scheme 2.
func TestMigrateOldTrail(t *testing.T) {
	const key = "tenant/t/project/p/old"
	for _, interrupted := range []bool{false, true} {
		t.Run(fmt.Sprintf("Interrupted=%v", interrupted), func(t *testing.T) {
			ch, old := mustOldTrail(t, key, interrupted)
			ctx := context.Background()
			s := audit.NewStore(ch.Conn)
			for range 2 {
				if err := s.Migrate(ctx); err != nil {
					t.Fatal(err)
				}
			}
			k := testKey(t)
			got, ok, err := s.EventRowAt(ctx, key, 1)
			if err != nil || !ok {
				t.Fatalf("EventRowAt: %v, %v", ok, err)
			}
			if got.HashScheme != audit.Scheme1 || audit.ChainHash(k, &got) != old.ChainHash || got.ChainHash != old.ChainHash {
				t.Fatalf("old row read back as scheme %d, chain hash %s recomputes to %s (written %s)",
					got.HashScheme, got.ChainHash, audit.ChainHash(k, &got), old.ChainHash)
			}
			next := audit.EventRow(event(key, 2, `{"n":9007199254740993}`, `{"n":9007199254740994}`, time.Now().UTC()), audit.At{Partition: 0, Offset: 8}, k, audit.CurrentScheme, old.ChainHash)
			if err := s.InsertEvents(ctx, []audit.Row{next}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if got, _, err := s.EventRowAt(ctx, key, 2); err != nil || got.HashScheme != audit.Scheme2 || audit.ChainHash(k, &got) != next.ChainHash {
				t.Fatalf("new row: scheme %d, err %v", got.HashScheme, err)
			}
		})
	}
}
