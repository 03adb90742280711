package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

// TestRebuildEqualsLiveProjection writes through the API (creates, CAS
// updates, deletes, TTL entries, re-creates over deleted and expired
// keys), lets the live projector apply it, compacts the topic, rebuilds
// the projection into another schema and compares: equal; then a
// tampered live row is found by its key.
func TestRebuildEqualsLiveProjection(t *testing.T) {
	s := mustStack(t)
	ctx := context.Background()
	want := func(r response, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%d %s, want %d", r.Status, r.Body, status)
		}
	}
	for p := range 3 {
		prefix := fmt.Sprintf("/v1/kv/tenant/t%d/project/p/", p)
		for k := range 6 {
			key := fmt.Sprintf("%sk%d", prefix, k)
			want(s.do("PUT", key, devToken, `{"value":{"n":1},"expectedVersion":0,"semantics":{"purpose":"cursor"}}`), http.StatusOK)
			want(s.do("PUT", key, devToken, `{"value":{"n":2},"expectedVersion":1}`), http.StatusOK)
			switch k % 3 {
			case 0:
				want(s.do("DELETE", key+"?expectedVersion=2", devToken, nil), http.StatusOK)
			case 1:
				want(s.do("PUT", key, devToken, `{"value":"lease","ttlSeconds":1,"semantics":{"purpose":"checkpoint"}}`), http.StatusOK)
			}
		}
	}
	// Re-creates over a deleted and an expired key.
	want(s.do("PUT", "/v1/kv/tenant/t0/project/p/k0", devToken, `{"value":"again","expectedVersion":0}`), http.StatusOK)
	testenv.WaitFor(t, 10*time.Second, "the lease to expire", func() bool {
		return s.do("GET", "/v1/kv/tenant/t0/project/p/k1", devToken, nil).Status == http.StatusNotFound
	})
	want(s.do("PUT", "/v1/kv/tenant/t0/project/p/k1", devToken, `{"value":"mine","expectedVersion":0}`), http.StatusOK)
	// Every lease swept (its expire event projected) before the log is
	// read: a sweep after the rebuild would make the live projection
	// differ from it by that event.
	testenv.WaitFor(t, 30*time.Second, "the sweeper to expire every lease", func() bool {
		var n int
		err := s.pg.Pool.QueryRow(ctx, `SELECT count(*) FROM kv_entries WHERE live AND expires_at IS NOT NULL`).Scan(&n)
		return err == nil && n == 0
	})
	waitProjected(t, s)
	s.broker.Cluster.Compact() // no write is in flight: no open transaction

	pool := s.pg.MustSchema(t, "rebuilt")
	st, err := projector.Rebuild(ctx, projector.RebuildConfig{
		Brokers: s.broker.Addrs, Topic: s.broker.Topics.Changes, Partitions: s.broker.Topics.Partitions,
	}, projection.New(pool), nil)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	d, err := projection.Compare(ctx, s.pg.Pool, "rebuilt", "public", s.broker.Topics.Changes, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Equal() || d.NotCompared != 0 || d.Entries != 18 {
		t.Fatalf("rebuild of %d events: diff %+v; want equal over 18 keys", st.Events, d)
	}
	if d.History >= d.AgainstHistory {
		t.Errorf("history: rebuilt %d rows, live %d; want fewer after compaction", d.History, d.AgainstHistory)
	}

	const tampered = "tenant/t2/project/p/k5" // live, no lease: the sweeper never touches it
	if _, err := s.pg.Pool.Exec(ctx, `UPDATE kv_entries SET value = '{"n":3}' WHERE key = $1`, tampered); err != nil {
		t.Fatal(err)
	}
	d, err = projection.Compare(ctx, s.pg.Pool, "rebuilt", "public", s.broker.Topics.Changes, 10)
	if err != nil {
		t.Fatal(err)
	}
	if d.Equal() || len(d.Keys) != 1 || d.Keys[0].Key != tampered || !slices.Equal(d.Keys[0].Columns, []string{"value"}) {
		t.Errorf("after tampering %s: %+v", tampered, d)
	}
}
