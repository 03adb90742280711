package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// The semantic-KV seed's "Stale Request": a requestId is remembered for
// the key's last ESKV_REQUEST_ID_WINDOW versions, not only the latest
// (writer/requestid.go). Each test runs the same sequence; they differ in
// where the writer learns the older requestIds: the overlay (events not
// projected yet), the overlay rebuilt from the log by a restarted writer,
// or kv_history.

// staleKeys are the keys of one run of the sequence.
type staleKeys struct{ cursor, counter string }

func newStaleKeys(name string) staleKeys {
	return staleKeys{cursor: base + "stale/" + name + "/cursor", counter: base + "stale/" + name + "/counter"}
}

// writeStaleSequence writes cursor=1 (sync-1) then cursor=2 (sync-2),
// and increments the counter twice (inc-1, inc-2).
func writeStaleSequence(t *testing.T, s *stack, k staleKeys) {
	t.Helper()
	for i, body := range []string{`{"value":{"cursor":1},"requestId":"sync-1"}`, `{"value":{"cursor":2},"requestId":"sync-2"}`} {
		if r := s.do("PUT", k.cursor, devToken, body); r.Status != 200 || r.entry(t).Version != int64(i+1) {
			t.Fatalf("put %s: %d %s", body, r.Status, r.Body)
		}
	}
	for i, id := range []string{"inc-1", "inc-2"} {
		if r := s.do("POST", k.counter+":increment", devToken, `{"by":1,"create":true,"requestId":"`+id+`"}`); r.Status != 200 || r.entry(t).Version != int64(i+1) {
			t.Fatalf("increment %s: %d %s", id, r.Status, r.Body)
		}
	}
}

// checkStaleRetries retries the writes of writeStaleSequence: the older
// ones answer 409 version_conflict on requestId naming the version they
// were applied at, nothing is written (cursor stays 2, the counter 2);
// the latest ones are replayed; an older requestId with another body is
// a reuse.
func checkStaleRetries(t *testing.T, s *stack, k staleKeys) {
	t.Helper()
	stale := s.do("PUT", k.cursor, devToken, `{"value":{"cursor":1},"requestId":"sync-1"}`)
	expectStale(t, "retry of sync-1", stale, 2, `{"cursor":2}`)
	replay := s.do("PUT", k.cursor, devToken, `{"value":{"cursor":2},"requestId":"sync-2"}`)
	if replay.Status != 200 || replay.Header.Get("Eskv-Replayed") != "true" || replay.entry(t).Version != 2 {
		t.Fatalf("replay of sync-2 (the latest write): %d %v %s, want 200 Eskv-Replayed: true at version 2", replay.Status, replay.Header, replay.Body)
	}
	reused := s.do("PUT", k.cursor, devToken, `{"value":{"cursor":7},"requestId":"sync-1"}`)
	if e := reused.errorBody(t); reused.Status != http.StatusConflict || e.Code != contract.EConflict || e.Field != "requestId" || !strings.Contains(e.Message, "different write") {
		t.Fatalf("sync-1 with another body: %d %s, want 409 version_conflict (reused requestId)", reused.Status, reused.Body)
	}
	inc := s.do("POST", k.counter+":increment", devToken, `{"by":1,"create":true,"requestId":"inc-1"}`)
	expectStale(t, "retry of inc-1", inc, 2, `2`)
	if r := s.do("POST", k.counter+":increment", devToken, `{"by":1,"create":true,"requestId":"inc-2"}`); r.Status != 200 || r.Header.Get("Eskv-Replayed") != "true" {
		t.Fatalf("replay of inc-2: %d %s", r.Status, r.Body)
	}

	if got := s.do("GET", k.cursor, devToken, nil).entry(t); got.Version != 2 || string(got.Value) != `{"cursor":2}` {
		t.Fatalf("cursor after the retries: version %d value %s, want version 2 cursor=2", got.Version, got.Value)
	}
	if got := s.do("GET", k.counter, devToken, nil).entry(t); got.Version != 2 || string(got.Value) != `2` {
		t.Fatalf("counter after the retries: version %d value %s, want 2 (an increment applied twice)", got.Version, got.Value)
	}
	for _, key := range []string{k.cursor, k.counter} {
		if evs := keyEvents(t, s, strings.TrimPrefix(key, "/v1/kv/")); len(evs) != 2 {
			t.Fatalf("%s has %d events in the log, want 2", key, len(evs))
		}
	}
	conflicts := map[string]int{}
	for _, c := range s.readConflicts(t) {
		if c.Key == strings.TrimPrefix(k.cursor, "/v1/kv/") || c.Key == strings.TrimPrefix(k.counter, "/v1/kv/") {
			conflicts[c.Reason]++
		}
	}
	if conflicts["stale_request"] < 2 || conflicts["request_id_reused"] < 1 {
		t.Fatalf("kv.conflicts records %v, want stale_request and request_id_reused", conflicts)
	}
}

// expectStale checks a stale retry's answer: 409 version_conflict on
// requestId, naming the version it was applied at, with the current
// version and value.
func expectStale(t *testing.T, what string, r response, current int64, value string) {
	t.Helper()
	e := r.errorBody(t)
	if r.Status != http.StatusConflict || e.Code != contract.EConflict || e.Field != "requestId" ||
		!strings.Contains(e.Message, "already applied at version") || e.CurrentVersion == nil || *e.CurrentVersion != current ||
		string(e.CurrentValue) != value || e.CorrelationID == "" {
		t.Fatalf("%s: %d %s, want 409 version_conflict on requestId at current version %d value %s", what, r.Status, r.Body, current, value)
	}
}

// historyRows counts the kv_history rows of the stale keys.
func historyRows(t *testing.T, s *stack, k staleKeys) int {
	t.Helper()
	var n int
	err := s.pg.Pool.QueryRow(context.Background(), `SELECT count(*) FROM kv_history WHERE key = ANY($1)`,
		[]string{strings.TrimPrefix(k.cursor, "/v1/kv/"), strings.TrimPrefix(k.counter, "/v1/kv/")}).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStaleRequestUnprojected: without a projector, every event is only
// in the writer's overlay: the older requestIds come from the overlay's
// memory of the key's unprojected events.
func TestStaleRequestUnprojected(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WithoutProjector())
	k := newStaleKeys("unprojected")
	writeStaleSequence(t, s, k)
	checkStaleRetries(t, s, k)
	if n := historyRows(t, s, k); n != 0 {
		t.Fatalf("kv_history holds %d rows: the test was meant to run on unprojected events", n)
	}
}

// TestStaleRequestAcrossWriterRestart: the writer process is killed and
// restarted between the writes and their retries. With the projector
// stopped, the restarted writer rebuilds the overlay from the log
// (catch-up) and knows the older requestIds from it; with the projection
// caught up, its overlay is empty and it finds them in kv_history; once
// the projector applied the rest, the retries still answer the same.
func TestStaleRequestAcrossWriterRestart(t *testing.T) {
	t.Parallel()
	s := mustProcStack(t)
	restart := func() {
		t.Helper()
		s.writer.Kill()
		mustStart(t, s.writer)
		waitHTTP(t, s.url+"/readyz", 60*time.Second)
	}

	t.Run("OverlayFromLog", func(t *testing.T) {
		s.tb = t
		k := newStaleKeys("restart-overlay")
		s.projector.Kill()
		writeStaleSequence(t, s.stack, k)
		restart()
		checkStaleRetries(t, s.stack, k)
		if n := historyRows(t, s.stack, k); n != 0 {
			t.Fatalf("kv_history holds %d rows: the test was meant to run on unprojected events", n)
		}
		mustStart(t, s.projector)
		waitProjected(t, s.stack)
		restart()
		checkStaleRetries(t, s.stack, k)
	})
	t.Run("History", func(t *testing.T) {
		s.tb = t
		if !s.projector.Alive() { // OverlayFromLog failed before restarting it
			mustStart(t, s.projector)
		}
		k := newStaleKeys("restart-history")
		writeStaleSequence(t, s.stack, k)
		waitProjected(t, s.stack)
		if n := historyRows(t, s.stack, k); n != 4 {
			t.Fatalf("kv_history holds %d rows of the 4 events", n)
		}
		restart()
		checkStaleRetries(t, s.stack, k)
	})
}
