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
	t.Parallel()
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
	d, err := projection.Compare(ctx, s.pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: s.broker.Topics.Changes, Limit: 10})
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
	d, err = projection.Compare(ctx, s.pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: s.broker.Topics.Changes, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if d.Equal() || len(d.Keys) != 1 || d.Keys[0].Key != tampered || !slices.Equal(d.Keys[0].Columns, []string{"value"}) {
		t.Errorf("after tampering %s: %+v", tampered, d)
	}
}

// TestRebuildKeepsSetMembers: element changes have record keys of their
// own (events.Event.RecordKey), so compaction keeps each member's latest
// change and a rebuild from the compacted topic folds the same members
// as the live projection: a set with adds, removes and a re-add, and a
// set deleted and re-created (the first set's members stay orphan rows,
// not members, on both sides).
func TestRebuildKeepsSetMembers(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	ctx := context.Background()
	const (
		a = "tenant/t0/project/p/sets/a"
		b = "tenant/t1/project/p/sets/b"
	)
	write := func(method, path, body string) {
		t.Helper()
		if r := s.do(method, "/v1/kv/"+path, devToken, body); r.Status != http.StatusOK {
			t.Fatalf("%s %s %s: %d %s", method, path, body, r.Status, r.Body)
		}
	}
	member := func(i int) string { return fmt.Sprintf(`m%02d é/x`, i) }
	for i := range 20 {
		write("POST", a+":sadd", `{"member":"`+member(i)+`"}`)
	}
	for i := range 5 {
		write("POST", a+":srem", `{"member":"`+member(i)+`"}`)
	}
	write("POST", a+":sadd", `{"member":"`+member(0)+`"}`) // re-added
	write("POST", a+":srem", `{"member":"`+member(10)+`"}`)
	wantA := []string{member(0)}
	for i := 5; i < 20; i++ {
		if i != 10 {
			wantA = append(wantA, member(i))
		}
	}
	write("POST", b+":sadd", `{"member":"x"}`)
	write("POST", b+":sadd", `{"member":"y"}`)
	write("DELETE", b, "")
	write("POST", b+":sadd", `{"member":"y"}`)
	write("POST", b+":sadd", `{"member":"z"}`)
	waitProjected(t, s)
	s.broker.Cluster.Compact() // no write is in flight: no open transaction

	// The compacted log holds the latest change of each member of a (20
	// record keys, 27 events written), and of b its delete and the latest
	// change of x, y and z.
	kept := map[string][]int64{}
	for _, e := range s.readLog(ctx) {
		kept[e.Key] = append(kept[e.Key], e.Version)
	}
	if len(kept[a]) != 20 || slices.Max(kept[a]) != 27 || len(kept[b]) != 4 || slices.Max(kept[b]) != 5 {
		t.Fatalf("compacted log holds versions %v of a and %v of b; want 20 of a up to 27, 4 of b up to 5", kept[a], kept[b])
	}

	pool := s.pg.MustSchema(t, "rebuilt")
	rebuilt := projection.New(pool)
	st, err := projector.Rebuild(ctx, projector.RebuildConfig{
		Brokers: s.broker.Addrs, Topic: s.broker.Topics.Changes, Partitions: s.broker.Topics.Partitions,
	}, rebuilt, nil)
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	d, err := projection.Compare(ctx, s.pg.Pool, projection.DiffSpec{Schema: "rebuilt", Against: "public", Topic: s.broker.Topics.Changes, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if !d.Equal() || d.NotCompared != 0 || d.Entries != 2 {
		t.Fatalf("rebuild of %d events: diff %+v, keys %+v; want equal over 2 sets", st.Events, d, d.Keys)
	}
	for _, tc := range []struct {
		set  string
		want []string
	}{{a, wantA}, {b, []string{"y", "z"}}} {
		for name, st := range map[string]*projection.Store{"live": s.store, "rebuilt": rebuilt} {
			got, _, err := st.Members(ctx, tc.set, "", 100, time.Now())
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("%s members of %s: %q (%v); want %q", name, tc.set, got, err, tc.want)
			}
		}
	}
}
