package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/schemas"
)

func TestMustBrokerCreatesTopics(t *testing.T) {
	b := MustBroker(t, 4)
	if len(b.Addrs) != 1 {
		t.Fatalf("want one broker address, got %v", b.Addrs)
	}
}

// TestProducerCommitsAndAborts: committed events and conflicts are read
// back from their partitions, aborted ones are not, and Committed reports
// the last stable offset of the partitions written to.
func TestProducerCommitsAndAborts(t *testing.T) {
	b := MustBroker(t, 4)
	p := MustProducer(t, b)
	now := time.Now().UTC()
	ev := func(key string, v int64) contract.Event {
		return contract.Event{SchemaVersion: contract.SchemaVersion, Key: key, Scope: "tenant/t/project/p", Version: v, PrevVersion: v - 1,
			Kind: contract.KindPut, Op: contract.OpSet, After: json.RawMessage(`1`), CreatedAt: now, TS: now, Principal: "test"}
	}
	p.Commit(t, ev("tenant/t/project/p/a", 1), &decide.Conflict{Key: "tenant/t/project/p/a", Scope: "tenant/t/project/p", TS: now})
	p.Abort(t, ev("tenant/t/project/p/a", 2))
	p.Commit(t, ev("tenant/t/project/p/b", 1))
	MustProduce(t, b, ev("tenant/t/project/p/c", 1))

	part := changelog.Partition("tenant/t/project/p", b.Topics.Partitions)
	got := p.Committed(t)
	// a@1, marker, aborted a@2, marker, b@1, marker, c@1 (another producer), marker
	if len(got) != 1 || got[part] != 8 {
		t.Fatalf("Committed() = %v; want partition %d at 8", got, part)
	}
	ctx := t.Context()
	var keys []string
	end := EndOffsets(ctx, t, p.Client, b.Topics.Changes)[part]
	err := changelog.ReadCommitted(ctx, p.Client, changelog.Range{Topic: b.Topics.Changes, Partition: part, From: 0, End: end}, func(r *kgo.Record) error {
		e, err := changelog.Event(r)
		keys = append(keys, fmt.Sprintf("%s@%d", e.Key, e.Version))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tenant/t/project/p/a@1", "tenant/t/project/p/b@1", "tenant/t/project/p/c@1"}; !slices.Equal(keys, want) {
		t.Fatalf("committed events %q; want %q", keys, want)
	}
	if n := EndOffsets(ctx, t, p.Client, b.Topics.Conflicts)[part]; n != 2 {
		t.Fatalf("kv.conflicts partition %d ends at %d; want 2 (the conflict and its marker)", part, n)
	}
}

func TestRunUntilCleanup(t *testing.T) {
	errStopped := errors.New("stopped")
	t.Run("OKStopReturnsRunsError", func(t *testing.T) {
		r := RunUntilCleanup(t, "service", func(ctx context.Context) error {
			<-ctx.Done()
			return errStopped
		})
		select {
		case <-r.Done():
			t.Fatal("returned before the cancel")
		default:
		}
		if err := r.Stop(t); !errors.Is(err, errStopped) {
			t.Fatalf("Stop() = %v; want %v", err, errStopped)
		}
	})
	t.Run("OKWaitReturnsWhenRunReturns", func(t *testing.T) {
		r := RunUntilCleanup(t, "service", func(context.Context) error { return errStopped })
		if err := r.Wait(t, 10*time.Second); !errors.Is(err, errStopped) {
			t.Fatalf("Wait() = %v; want %v", err, errStopped)
		}
	})
	t.Run("OKCancelledAtCleanup", func(t *testing.T) {
		var stopped bool
		t.Run("Test", func(t *testing.T) {
			RunUntilCleanup(t, "service", func(ctx context.Context) error {
				<-ctx.Done()
				stopped = true
				return nil
			})
		})
		if !stopped {
			t.Fatal("run was not cancelled and awaited at the end of the test")
		}
	})
}

func TestWaitFor(t *testing.T) {
	n := 0
	WaitFor(t, 10*time.Second, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Fatalf("polled %d times; want 3", n)
	}
	n = 0
	WaitForNil(t, 10*time.Second, "the third poll", func() error {
		if n++; n < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if n != 3 {
		t.Fatalf("WaitForNil polled %d times; want 3", n)
	}
}

// TestDatabasesLiveAsLongAsTheTest: each server gives a test a fresh
// database eskv_t_<random> and drops it when the test ends.
func TestDatabasesLiveAsLongAsTheTest(t *testing.T) {
	pgCount := func(t *testing.T, name string) uint64 {
		c, err := pgx.Connect(t.Context(), envOr("ESKV_TEST_POSTGRES_URL", DefaultPostgresURL))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var n uint64
		if err := c.QueryRow(t.Context(), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	chCount := func(t *testing.T, name string) uint64 {
		c, err := openClickHouse(envOr("ESKV_TEST_CLICKHOUSE_ADDR", DefaultClickHouseAddr), "default")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var n uint64
		if err := c.QueryRow(t.Context(), "SELECT count() FROM system.databases WHERE name = ?", name).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		name   string
		create func(testing.TB) string
		count  func(*testing.T, string) uint64
	}{
		{"Postgres", func(tb testing.TB) string { return MustPostgresDB(tb).Name }, pgCount},
		{"ClickHouse", func(tb testing.TB) string { return MustClickHouse(tb).Database }, chCount},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var name string
			t.Run("Test", func(t *testing.T) {
				name = tc.create(t)
				if !strings.HasPrefix(name, "eskv_t_") || tc.count(t, name) != 1 {
					t.Fatalf("database %q: want one named eskv_t_<random>", name)
				}
			})
			if name == "" {
				return // skipped (ESKV_UNIT_ONLY=1)
			}
			if n := tc.count(t, name); n != 0 {
				t.Fatalf("database %s still there after the test", name)
			}
		})
	}
}

// TestPostgresFromTemplate: a test's database is a copy of the migrated
// template named by the migrations' hash, and holds the whole schema;
// when the template cannot be copied (gone), the test's database is
// created empty and migrated all the same.
func TestPostgresFromTemplate(t *testing.T) {
	adminURL := envOr("ESKV_TEST_POSTGRES_URL", DefaultPostgresURL)
	latest := func(t *testing.T, pg *Postgres) (v int64) {
		if err := pg.Pool.QueryRow(t.Context(), "SELECT max(version_id) FROM goose_db_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	migrations, err := fs.Glob(schemas.Postgres, "postgres/*.sql")
	if err != nil || len(migrations) == 0 {
		t.Fatalf("migrations %v, %v", migrations, err)
	}
	want, err := strconv.ParseInt(strings.SplitN(path.Base(migrations[len(migrations)-1]), "_", 2)[0], 10, 64)
	if err != nil {
		t.Fatal(err)
	}

	pg := MustPostgresDB(t)
	hash, err := migrationsHash()
	if err != nil {
		t.Fatal(err)
	}
	var tpl string
	if err := pg.Pool.QueryRow(t.Context(), "SELECT datname FROM pg_database WHERE datname = $1", templatePrefix+hash).Scan(&tpl); err != nil {
		t.Fatalf("the template %s%s: %v", templatePrefix, hash, err)
	}
	if v := latest(t, pg); v != want {
		t.Fatalf("a copy of the template at migration %d; want %d", v, want)
	}

	if v := latest(t, mustPostgresFrom(t, adminURL, templatePrefix+"gone")); v != want {
		t.Fatalf("a database created without the template at migration %d; want %d", v, want)
	}
}
