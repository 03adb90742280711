package projection_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/testenv"
)

func count(tb testing.TB, pool *pgxpool.Pool, sql string) int64 {
	tb.Helper()
	var n int64
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestInSchema(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	ctx := context.Background()
	pool := pg.MustSchema(t, "rebuild_a")

	if got, err := projection.CurrentSchema(ctx, pool); err != nil || got != "rebuild_a" {
		t.Fatalf("current schema %q, %v; want rebuild_a", got, err)
	}
	if got, err := projection.CurrentSchema(ctx, pg.Pool); err != nil || got != "public" {
		t.Fatalf("current schema of the default pool %q, %v; want public", got, err)
	}
	// The schema holds its own projection tables and migration version.
	if n := count(t, pg.Pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'rebuild_a'
		AND tablename IN ('kv_entries', 'kv_history', 'projector_offsets', 'projector_topic', 'goose_db_version')`); n != 5 {
		t.Errorf("rebuild_a has %d of the 5 projection tables", n)
	}

	s := projection.New(pool)
	e := put(t, "tenant/t/project/p/k", 1, `{"a":1}`)
	mustApply(t, s, "kv.changes", batchOf(0, e))
	if got := mustState(t, s, e.Key); !reflect.DeepEqual(got, keystate.FromEvent(&e)) {
		t.Errorf("state in rebuild_a:\n got %+v\nwant %+v", got, keystate.FromEvent(&e))
	}
	if got := mustState(t, projection.New(pg.Pool), e.Key); got.Version != 0 {
		t.Errorf("the key reached the public schema: %+v", got)
	}
	offs, err := projection.OffsetsIn(ctx, pg.Pool, "rebuild_a", "kv.changes")
	if err != nil || !reflect.DeepEqual(offs, map[int32]int64{0: 1}) {
		t.Errorf("OffsetsIn = %v, %v; want map[0:1]", offs, err)
	}
}

func TestCreateSchema(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		created, err := projection.CreateSchema(ctx, pg.Pool, "fresh", false)
		if err != nil || !created {
			t.Fatalf("CreateSchema = %v, %v; want created", created, err)
		}
	})
	t.Run("OKEmptyExisting", func(t *testing.T) {
		if _, err := pg.Pool.Exec(ctx, `CREATE SCHEMA empty`); err != nil {
			t.Fatal(err)
		}
		created, err := projection.CreateSchema(ctx, pg.Pool, "empty", false)
		if err != nil || created {
			t.Fatalf("CreateSchema = %v, %v; want nil and not created", created, err)
		}
	})
	t.Run("ErrNotEmpty", func(t *testing.T) {
		pg.MustSchema(t, "full")
		_, err := projection.CreateSchema(ctx, pg.Pool, "full", false)
		if !errors.Is(err, projection.ErrSchemaNotEmpty) {
			t.Fatalf("CreateSchema of a migrated schema = %v, want ErrSchemaNotEmpty", err)
		}
		if n := count(t, pg.Pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'full'`); n == 0 {
			t.Errorf("the refused schema lost its tables")
		}
	})
	t.Run("OKReplace", func(t *testing.T) {
		pg.MustSchema(t, "old")
		created, err := projection.CreateSchema(ctx, pg.Pool, "old", true)
		if err != nil || !created {
			t.Fatalf("CreateSchema --replace = %v, %v; want created", created, err)
		}
		if n := count(t, pg.Pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'old'`); n != 0 {
			t.Errorf("the replaced schema still has %d tables", n)
		}
	})
	t.Run("ErrLiveSchema", func(t *testing.T) {
		_, err := projection.CreateSchema(ctx, pg.Pool, "public", true)
		if contract.ErrorCode(err) != contract.EInvalid {
			t.Fatalf("CreateSchema of the pool's own schema = %v, want invalid", err)
		}
		if err := projection.DropSchema(ctx, pg.Pool, "public"); contract.ErrorCode(err) != contract.EInvalid {
			t.Fatalf("DropSchema of the pool's own schema = %v, want invalid", err)
		}
		if n := count(t, pg.Pool, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public' AND tablename = 'kv_entries'`); n != 1 {
			t.Errorf("public lost kv_entries")
		}
	})
	t.Run("ErrBadName", func(t *testing.T) {
		for _, name := range []string{"", "Upper", "1x", "a-b", `x"; DROP SCHEMA public; --`, "pg_temp", "information_schema"} {
			if _, err := projection.CreateSchema(ctx, pg.Pool, name, false); contract.ErrorCode(err) != contract.EInvalid {
				t.Errorf("CreateSchema(%q) = %v, want invalid", name, err)
			}
		}
	})
	t.Run("OKDrop", func(t *testing.T) {
		pg.MustSchema(t, "gone")
		if err := projection.DropSchema(ctx, pg.Pool, "gone"); err != nil {
			t.Fatal(err)
		}
		if n := count(t, pg.Pool, `SELECT count(*) FROM pg_namespace WHERE nspname = 'gone'`); n != 0 {
			t.Errorf("schema still exists")
		}
		if err := projection.DropSchema(ctx, pg.Pool, "gone"); err != nil {
			t.Errorf("dropping a missing schema: %v", err)
		}
	})
}

func TestClaimTopic(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	ctx := context.Background()
	first := projection.Topic{Name: "kv.changes", ID: "id-1", Partitions: 12}
	got, err := s.ClaimTopic(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != "id-1" || got.Partitions != 12 || time.Since(got.FirstSeen) > time.Minute {
		t.Errorf("first claim = %+v", got)
	}
	// Later claims return what was recorded first.
	again, err := s.ClaimTopic(ctx, projection.Topic{Name: "kv.changes", ID: "id-2", Partitions: 24})
	if err != nil {
		t.Fatal(err)
	}
	if again != got {
		t.Errorf("second claim = %+v, want the first %+v", again, got)
	}
	other, err := s.ClaimTopic(ctx, projection.Topic{Name: "other", ID: "id-3", Partitions: 1})
	if err != nil || other.ID != "id-3" {
		t.Errorf("claim of another topic = %+v, %v", other, err)
	}
}
