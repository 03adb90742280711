package projection_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// TestApplyInEveryExecMode: Apply folds the same batch into the same
// rows whatever the pool's exec mode, those that describe statements
// (its columns go as pgarrays.go's arrays) and those that do not (plain
// slices).
func TestApplyInEveryExecMode(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	for i, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(pg.URL)
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.DefaultQueryExecMode = mode
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			s := projection.New(pool)
			key := fmt.Sprintf("tenant/t/project/p/mode%d", i)
			mustApply(t, s, "kv.changes", batchOf(int64(10*i), put(t, key, 1, `{"a":1,"b":"x"}`), put(t, key, 2, `{"a":2,"b":null}`)))
			st := mustState(t, s, key)
			if st.Version != 2 || string(st.Entry.Value) != `{"a":2,"b":null}` {
				t.Fatalf("state: version %d value %s", st.Version, st.Entry.Value)
			}
		})
	}
}
