package service

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eskv/eskv/testenv"
)

// TestPoolCollector: the eskv_pgxpool_* metrics follow a real pool: a
// held connection is acquired, released it is idle, and every acquire
// is counted.
func TestPoolCollector(t *testing.T) {
	pool := testenv.MustPostgres(t)
	reg := prometheus.NewRegistry()
	if err := reg.Register(NewPoolCollector(pool, "projection")); err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			m := mf.GetMetric()[0]
			if l := m.GetLabel(); len(l) != 1 || l[0].GetName() != "pool" || l[0].GetValue() != "projection" {
				t.Fatalf("%s labels %v", name, l)
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
		t.Fatalf("no %s", name)
		return 0
	}
	ctx := context.Background()
	acquires := value("eskv_pgxpool_acquires_total")
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := value("eskv_pgxpool_acquired_conns"); got != 1 {
		t.Errorf("acquired_conns %v while one is held, want 1", got)
	}
	conn.Release()
	if a, i, tot := value("eskv_pgxpool_acquired_conns"), value("eskv_pgxpool_idle_conns"), value("eskv_pgxpool_total_conns"); a != 0 || i < 1 || tot != a+i {
		t.Errorf("after release: acquired %v idle %v total %v", a, i, tot)
	}
	if got := value("eskv_pgxpool_acquires_total"); got != acquires+1 {
		t.Errorf("acquires_total %v, want %v", got, acquires+1)
	}
	if value("eskv_pgxpool_max_conns") < 1 || value("eskv_pgxpool_new_conns_total") < 1 {
		t.Error("max_conns or new_conns_total not set")
	}
	if n := testutil.CollectAndCount(NewPoolCollector(pool, "p")); n != 11 {
		t.Errorf("%d metrics, want 11", n)
	}
}
