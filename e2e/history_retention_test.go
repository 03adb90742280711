package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

// retainer is a projector of the stack's topic configured with keep,
// used only to run its history retention once at a time (PruneHistory),
// and the registry of its metrics. The stack's own projector keeps
// folding the log meanwhile.
func retainer(t *testing.T, s *stack, keep projection.Retention) (*projector.Projector, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	p, err := projector.New(projector.Config{Brokers: s.broker.Addrs, Topic: s.broker.Topics.Changes,
		Partitions: s.broker.Topics.Partitions, Retention: keep}, s.store, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	return p, reg
}

// historyVersions lists the versions kv_history holds per key of keys
// (paths under base), as "name:v1,v2".
func historyVersions(t *testing.T, s *stack, keys ...string) string {
	t.Helper()
	var out []string
	for _, k := range keys {
		var vs []int64
		err := s.pg.Pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(version ORDER BY version), '{}') FROM kv_history WHERE key = $1`,
			strings.TrimPrefix(base, "/v1/kv/")+k).Scan(&vs)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%v", k, vs))
	}
	return strings.Join(out, " ")
}

// counterOf reads a counter or gauge of reg.
func counterOf(t *testing.T, reg *prometheus.Registry, name string) float64 {
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
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestHistoryRetentionVersions (issue 14 part 1): with versions=2 the
// retention removes exactly the versions of each key beyond its newest
// two (3 of a 5-version key with a delete and a re-create, 1 of a set's
// 3) and nothing else: keys with 1 or 2 versions, a deleted key's
// tombstone and every newest version stay; a second run removes nothing;
// the metric counts the rows. The history read answers what is left; the
// latest write's requestId is still recognized (replayed); the audit
// trail, which the retention never touches, still verifies clean.
func TestHistoryRetentionVersions(t *testing.T) {
	t.Parallel()
	s, at := mustAuditedStack(t)
	writes := []struct {
		method, key string
		body        any
	}{
		{"PUT", "ret/a", `{"value":1}`}, {"PUT", "ret/a", `{"value":2}`}, {"DELETE", "ret/a", nil},
		{"PUT", "ret/a", `{"value":4}`}, {"PUT", "ret/a", `{"value":5,"requestId":"a-5"}`},
		{"PUT", "ret/b", `{"value":1}`}, {"PUT", "ret/b", `{"value":2}`},
		{"PUT", "ret/c", `{"value":1}`},
		{"PUT", "ret/d", `{"value":1}`}, {"DELETE", "ret/d", nil},
		{"POST", "ret/s:sadd", `{"member":"x"}`}, {"POST", "ret/s:sadd", `{"member":"y"}`}, {"POST", "ret/s:srem", `{"member":"x"}`},
	}
	for _, w := range writes {
		if r := s.do(w.method, base+w.key, acmeToken, w.body); r.Status != 200 {
			t.Fatalf("%s %s: %d %s", w.method, w.key, r.Status, r.Body)
		}
	}
	waitProjected(t, s)
	keys := []string{"ret/a", "ret/b", "ret/c", "ret/d", "ret/s"}
	if got, want := historyVersions(t, s, keys...), "ret/a:[1 2 3 4 5] ret/b:[1 2] ret/c:[1] ret/d:[1 2] ret/s:[1 2 3]"; got != want {
		t.Fatalf("before: %s, want %s", got, want)
	}

	p, reg := retainer(t, s, projection.Retention{MaxVersions: 2})
	n, err := p.PruneHistory(context.Background(), time.Now())
	if err != nil || n != 4 {
		t.Fatalf("retention run: %d rows, %v; want 4", n, err)
	}
	if got, want := historyVersions(t, s, keys...), "ret/a:[4 5] ret/b:[1 2] ret/c:[1] ret/d:[1 2] ret/s:[2 3]"; got != want {
		t.Fatalf("after: %s, want %s", got, want)
	}
	if n, err := p.PruneHistory(context.Background(), time.Now()); err != nil || n != 0 {
		t.Fatalf("second run: %d rows, %v; want 0", n, err)
	}
	if v := counterOf(t, reg, "eskv_projector_history_deleted_total"); v != 4 {
		t.Fatalf("eskv_projector_history_deleted_total = %v, want 4", v)
	}
	if v := counterOf(t, reg, "eskv_projector_history_retention_last_run_timestamp_seconds"); v == 0 {
		t.Fatal("the last-run gauge did not move")
	}

	checkVersions(t, "history of ret/a after retention", historyPage(t, s, base+"ret/a", readerTok, "").Versions,
		[]string{"4 put set acme-svc 4 ", "5 put set acme-svc 5 a-5"})
	if r := s.do("PUT", base+"ret/a", acmeToken, `{"value":5,"requestId":"a-5"}`); r.Status != 200 || r.Header.Get("Eskv-Replayed") != "true" {
		t.Fatalf("retry of the latest write after retention: %d %v %s, want a replay", r.Status, r.Header, r.Body)
	}

	waitAudited(t, s, 60*time.Second)
	if rep := at.verify(t, s); len(rep.Discrepancies) != 0 || rep.Events < len(writes) {
		t.Fatalf("auditor verify after retention: %+v", rep)
	}
}

// TestHistoryRetentionAge: with age=1h, a run at time T removes the
// versions whose ts is more than an hour before T, except each key's
// newest: run just after ret/e's second version plus an hour, it removes
// ret/e's first version only (ret/f, written first, keeps its only
// version); run days later, ret/e keeps only its newest.
func TestHistoryRetentionAge(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	for _, w := range [][2]string{{"ret/f", `{"value":"f"}`}, {"ret/e", `{"value":1}`}, {"ret/e", `{"value":2}`}, {"ret/e", `{"value":3}`}} {
		if r := s.do("PUT", base+w[0], acmeToken, w[1]); r.Status != 200 {
			t.Fatalf("put %s: %d %s", w[0], r.Status, r.Body)
		}
	}
	waitProjected(t, s)
	second := historyPage(t, s, base+"ret/e", readerTok, "?fromVersion=2&limit=1").Versions[0].TS
	p, reg := retainer(t, s, projection.Retention{MaxAge: time.Hour})
	if n, err := p.PruneHistory(context.Background(), second.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("run at the second version + 1h: %d rows, %v; want 1", n, err)
	}
	if got, want := historyVersions(t, s, "ret/e", "ret/f"), "ret/e:[2 3] ret/f:[1]"; got != want {
		t.Fatalf("after the first run: %s, want %s", got, want)
	}
	if n, err := p.PruneHistory(context.Background(), time.Now().Add(72*time.Hour)); err != nil || n != 1 {
		t.Fatalf("run 3 days later: %d rows, %v; want 1", n, err)
	}
	if got, want := historyVersions(t, s, "ret/e", "ret/f"), "ret/e:[3] ret/f:[1]"; got != want {
		t.Fatalf("after the second run: %s, want %s", got, want)
	}
	if v := counterOf(t, reg, "eskv_projector_history_deleted_total"); v != 2 {
		t.Fatalf("eskv_projector_history_deleted_total = %v, want 2", v)
	}
}

// TestHistoryRetentionRuns: a running projector configured with a
// retention applies it on its own, every RetentionInterval (here a
// second projector, in a group of its own, beside the stack's).
func TestHistoryRetentionRuns(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	for i := range 3 {
		if r := s.do("PUT", base+"ret/g", acmeToken, fmt.Sprintf(`{"value":%d}`, i)); r.Status != 200 {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
	}
	waitProjected(t, s)
	p, err := projector.New(projector.Config{Brokers: s.broker.Addrs, Topic: s.broker.Topics.Changes, Partitions: s.broker.Topics.Partitions,
		Group: "history-retention-test", Retention: projection.Retention{MaxVersions: 1}, RetentionInterval: 20 * time.Millisecond},
		s.store, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunUntilCleanup(t, "retaining projector", p.Run)
	testenv.WaitFor(t, 30*time.Second, "the retention to keep only ret/g's newest version", func() bool {
		return historyVersions(t, s, "ret/g") == "ret/g:[3]"
	})
}
