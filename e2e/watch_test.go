package e2e

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/watch"
)

// acks records acknowledged writes from several clients.
type acks struct {
	mu  sync.Mutex
	all []ack
	n   atomic.Int64
}

func (a *acks) add(x ack) {
	a.mu.Lock()
	a.all = append(a.all, x)
	a.mu.Unlock()
	a.n.Add(1)
}

// assertAcksWatched checks that every acknowledged write under prefix is
// an event the watcher received, with its value.
func assertAcksWatched(t *testing.T, got []contract.WatchEvent, a *acks) {
	t.Helper()
	seen := map[string]string{}
	for _, e := range got {
		seen[fmt.Sprintf("%s@%d", e.Key, e.Version)] = string(e.Value)
	}
	for _, x := range a.all {
		if v, ok := seen[fmt.Sprintf("%s@%d", x.key, x.version)]; !ok || v != x.value {
			t.Fatalf("acknowledged write %s@%d = %s was not watched (watched %q)", x.key, x.version, x.value, v)
		}
	}
}

// waitWatchedAll waits until the watcher received every event of the log
// under prefix from its first one on.
func waitWatchedAll(t *testing.T, s *stack, w *watchRecorder, prefix string) []contract.WatchEvent {
	t.Helper()
	var got []contract.WatchEvent
	testenv.WaitFor(t, 60*time.Second, "the watcher to receive the whole log of "+prefix, func() bool {
		var err error
		if got, err = w.events(); err != nil {
			t.Fatalf("watch: %v", err)
		}
		log := s.prefixLog(t.Context(), prefix)
		return len(got) > 0 && len(log) > 0 && got[len(got)-1].Cursor == log[len(log)-1].cursor
	})
	return got
}

// TestWatchSeesItsPrefix: two writers as processes; a watcher of one
// prefix on each (one of them does not own the prefix's partition) sees
// exactly the log's events under it, in order, every acknowledged write
// of the prefix among them, and none of the other prefixes written
// meanwhile — of the same project (the same partition) and others.
func TestWatchSeesItsPrefix(t *testing.T) {
	t.Parallel()
	ws := mustWriterProcs(t, 2)
	ws.url = ws.urls[0]
	const project = "tenant/acme/project/watch/"
	prefix := project + "mine/"
	others := []string{project + "min/", project + "other/", "tenant/acme/project/elsewhere/mine/", "tenant/globex/project/watch/mine/"}
	var recs []*watchRecorder
	for _, u := range ws.urls {
		w := startWatch(t, client.New(u, devToken), client.WatchOptions{Prefix: prefix})
		waitWatching(t, ws.stack, w, prefix+"sentinel")
		recs = append(recs, w)
	}
	var mine acks
	rngs := make([]*rand.Rand, 8)
	for c := range rngs {
		rngs[c] = rand.New(rand.NewPCG(uint64(c), 14))
	}
	stop := runClients(t, len(rngs), func(c, i int) {
		r := rngs[c]
		s := &stack{tb: t, url: ws.urls[r.IntN(len(ws.urls))]}
		p := prefix
		if r.IntN(2) == 0 {
			p = others[r.IntN(len(others))]
		}
		if a, ok := s.put(fmt.Sprintf("%sk%d", p, r.IntN(20)), fmt.Sprintf(`{"c":%d,"i":%d}`, c, i)); ok && p == prefix {
			mine.add(a)
		}
	})
	testenv.WaitFor(t, 60*time.Second, "1,000 acknowledged writes of the prefix", func() bool { return mine.n.Load() >= 1000 })
	stop()
	for i, w := range recs {
		got := waitWatchedAll(t, ws.stack, w, prefix)
		log := assertWatchedIsLog(t, ws.stack, prefix, got)
		assertAcksWatched(t, got, &mine)
		t.Logf("watcher on writer %d: %d events, the log's %d under %s from its first; the %d acknowledged writes of the prefix among them",
			i, len(got), len(log), prefix, len(mine.all))
	}
}

// TestWatchResumeAcrossWriterKills: a watcher is cancelled every few
// hundred events and resumes after its last cursor on the other writer,
// while 10,000 writes go through two writers that are killed (SIGKILL)
// and restarted in turn; what it received, end to end, is exactly the
// log's events under its prefix: no gap, no duplicate, and every
// acknowledged write.
func TestWatchResumeAcrossWriterKills(t *testing.T) {
	t.Parallel()
	ws := mustWriterProcs(t, 2)
	ws.url = ws.urls[0]
	prefix := "tenant/acme/project/resume/jobs/"
	clients := []*client.Client{
		client.New(ws.urls[0], devToken, client.WithRetries(5, 20*time.Millisecond, 200*time.Millisecond)),
		client.New(ws.urls[1], devToken, client.WithRetries(5, 20*time.Millisecond, 200*time.Millisecond)),
	}
	rng := rand.New(rand.NewPCG(15, 16))
	var sessions atomic.Int64
	w := startResumingWatch(t, clients, client.WatchOptions{Prefix: prefix}, func() int {
		sessions.Add(1)
		return 200 + rng.IntN(800)
	})
	waitWatching(t, ws.stack, w, prefix+"sentinel")

	var mine acks
	const total = 10_000
	stop := runClients(t, 16, func(c, i int) {
		s := &stack{tb: t, url: ws.urls[(c+i)%2]}
		if a, ok := s.put(fmt.Sprintf("%sk%d", prefix, (c*7+i)%50), fmt.Sprintf(`"c%d-%d"`, c, i)); ok {
			mine.add(a)
		} else {
			time.Sleep(20 * time.Millisecond) // a writer is restarting
		}
	})
	for k := 1; mine.n.Load() < total; k++ {
		target := min(int64(k)*total/4, total)
		testenv.WaitFor(t, 120*time.Second, "acknowledged writes", func() bool { return mine.n.Load() >= target })
		if target == total {
			break
		}
		victim := k % 2
		ws.writers[victim].Kill()
		mustStart(t, ws.writers[victim])
		waitHTTP(t, ws.urls[victim]+"/readyz", 60*time.Second)
	}
	stop()
	got := waitWatchedAll(t, ws.stack, w, prefix)
	log := assertWatchedIsLog(t, ws.stack, prefix, got)
	assertAcksWatched(t, got, &mine)
	t.Logf("%d events watched over %d sessions, equal to the log's %d from the first; %d acknowledged writes, 3 writer kills",
		len(got), sessions.Load(), len(log), len(mine.all))
}

// TestWatchRefusals: a token without the read right gets 403 (and a
// token that may read only part of a prefix too); the bound on watches
// answers 503 too_many_watches with Retry-After, and the gauge counts.
func TestWatchRefusals(t *testing.T) {
	t.Parallel()
	st := inproc.MustRun(t, inproc.Partitions(partitions), inproc.Watches(watch.Config{MaxWatches: 2, MaxWatchesPerPrincipal: 3}))
	for _, tc := range []struct{ name, token, query, field string }{
		{"WriteOnlyToken", inproc.WriterToken, "prefix=tenant/acme/project/demo/", "prefix"},
		{"WriteOnlyTokenKey", inproc.WriterToken, "key=tenant/acme/project/demo/k", "key"},
		{"OtherTenant", acmeToken, "prefix=tenant/globex/project/demo/", "prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := openWatch(t, st.URL, tc.token, tc.query)
			defer resp.Body.Close()
			var body contract.ErrorBody
			if err := jsonDecode(resp.Body, &body); err != nil || resp.StatusCode != http.StatusForbidden ||
				body.Error.Code != contract.EForbidden || body.Error.Field != tc.field {
				t.Fatalf("%d %+v (%v), want 403 forbidden on %s", resp.StatusCode, body, err, tc.field)
			}
		})
	}
	t.Run("TooManyWatches", func(t *testing.T) {
		for range 2 {
			resp := openWatch(t, st.URL, readerTok, "prefix=tenant/acme/project/demo/")
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("watch: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
		}
		if g := metricValue(t, st.Registry, "eskv_writer_watches", ""); g != 2 {
			t.Fatalf("eskv_writer_watches = %v, want 2", g)
		}
		resp := openWatch(t, st.URL, readerTok, "prefix=tenant/acme/project/demo/")
		defer resp.Body.Close()
		var body contract.ErrorBody
		if err := jsonDecode(resp.Body, &body); err != nil || resp.StatusCode != http.StatusServiceUnavailable ||
			body.Error.Code != contract.ETooManyWatches || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("third watch: %d %+v Retry-After %q (%v)", resp.StatusCode, body, resp.Header.Get("Retry-After"), err)
		}
	})
}

// TestWatchPrincipalShare: a principal that holds its share of a
// writer's watches (a tenth of ESKV_MAX_WATCHES by default) is refused
// more with 429 too_many_requests, Retry-After and the setting's name,
// and another principal still gets a watch: one principal's idle
// watches do not deny everyone's.
func TestWatchPrincipalShare(t *testing.T) {
	t.Parallel()
	const maxWatches = 20
	st := inproc.MustRun(t, inproc.Partitions(partitions), inproc.Watches(watch.Config{MaxWatches: maxWatches}))
	open := func(token string) (*http.Response, contract.ErrorBody) {
		resp := openWatch(t, st.URL, token, "prefix=tenant/acme/project/demo/")
		t.Cleanup(func() { resp.Body.Close() })
		var body contract.ErrorBody
		if resp.StatusCode != http.StatusOK {
			if err := jsonDecode(resp.Body, &body); err != nil {
				t.Fatalf("%d: %v", resp.StatusCode, err)
			}
		}
		return resp, body
	}
	held := 0
	for ; held < maxWatches; held++ {
		if resp, body := open(readerTok); resp.StatusCode != http.StatusOK {
			if resp.StatusCode != http.StatusTooManyRequests || body.Error.Code != contract.ETooManyRequests ||
				body.Error.Field != "ESKV_MAX_WATCHES_PER_PRINCIPAL" || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("watch %d of one principal: %d %+v Retry-After %q, want 429 too_many_requests on ESKV_MAX_WATCHES_PER_PRINCIPAL",
					held+1, resp.StatusCode, body, resp.Header.Get("Retry-After"))
			}
			break
		}
	}
	if resp, body := open(acmeToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("while one held %d, another principal's watch: %d %+v, want 200", held, resp.StatusCode, body)
	}
	if held != maxWatches/10 {
		t.Fatalf("one principal held %d of %d watches, want its share, %d", held, maxWatches, maxWatches/10)
	}
	if n := metricValue(t, st.Registry, "eskv_writer_watches_refused_total", "limit=ESKV_MAX_WATCHES_PER_PRINCIPAL"); n != 1 {
		t.Fatalf("eskv_writer_watches_refused_total{limit=ESKV_MAX_WATCHES_PER_PRINCIPAL} = %v, want 1", n)
	}
	t.Logf("one principal held %d watches of %d and was refused 429; another principal got its watch", held, maxWatches)
}

// TestWatchSlowConsumer: a client that stops reading while writes go on
// is ended with slow_consumer and the cursor of the last event it was
// sent, after every event before it; resuming after that cursor gives
// the rest: together, exactly the log. Other watchers and the writes
// never waited for it.
func TestWatchSlowConsumer(t *testing.T) {
	t.Parallel()
	st := inproc.MustRun(t, inproc.Partitions(partitions), inproc.Watches(watch.Config{Buffer: 16}))
	s := &stack{tb: t, broker: st.Broker, pg: st.Postgres, store: st.Store, url: st.URL}
	prefix := "tenant/acme/project/slow/"
	fast := startWatch(t, client.New(st.URL, devToken), client.WatchOptions{Prefix: prefix})
	waitWatching(t, s, fast, prefix+"sentinel")
	resp := openWatch(t, st.URL, devToken, "prefix="+prefix)
	defer resp.Body.Close()
	// Nobody reads resp: big values fill the socket's buffers, then the
	// watch's own.
	big := `{"pad":"` + strings.Repeat("x", 32<<10) + `"}`
	for i := 0; metricValue(t, st.Registry, "eskv_writer_watch_ends_total", "reason=slow_consumer") == 0; i++ {
		if i == 20_000 {
			t.Fatal("20,000 writes did not end the watch that nobody reads")
		}
		if _, ok := s.put(fmt.Sprintf("%sk%d", prefix, i%10), big); !ok {
			t.Fatalf("write %d failed", i)
		}
	}
	evs, err := readSSE(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	end := watchEnd(t, last)
	if last.event != "error" || end.Error.Code != contract.ESlowConsumer || len(evs) < 2 || end.Cursor != evs[len(evs)-2].id {
		t.Fatalf("the stream ended with %q %s after %d events, want slow_consumer with the cursor of the last event", last.event, last.data, len(evs)-1)
	}
	// Resume after the cursor and put one more to know the end.
	rest := startWatch(t, client.New(st.URL, devToken), client.WatchOptions{Prefix: prefix, After: end.Cursor})
	if _, ok := s.put(prefix+"last", `"end"`); !ok {
		t.Fatal("last write failed")
	}
	got := waitWatchedAll(t, s, rest, prefix)
	var before []contract.WatchEvent
	for _, e := range evs[:len(evs)-1] {
		var we contract.WatchEvent
		if err := jsonUnmarshal(e.data, &we); err != nil {
			t.Fatal(err)
		}
		before = append(before, we)
	}
	all := append(before, got...)
	log := assertWatchedIsLog(t, s, prefix, all)
	assertWatchedIsLog(t, s, prefix, waitWatchedAll(t, s, fast, prefix))
	t.Logf("slow watcher ended after %d events (cursor %s), resumed for %d more: %d, the log's", len(before), end.Cursor, len(got), len(log))
}

// TestWatchCursorExpired: once the log's start moves past a cursor
// (records deleted, as retention or kfake's compaction do), a watch
// after it, or from a key's version whose event is gone, answers 410
// cursor_expired; a watch from now still works.
func TestWatchCursorExpired(t *testing.T) {
	t.Parallel()
	st := inproc.MustRun(t, inproc.Partitions(partitions))
	s := &stack{tb: t, broker: st.Broker, pg: st.Postgres, store: st.Store, url: st.URL}
	prefix := "tenant/acme/project/expired/"
	w := startWatch(t, client.New(st.URL, devToken), client.WatchOptions{Prefix: prefix})
	waitWatching(t, s, w, prefix+"a")
	for i := range 10 {
		if _, ok := s.put(prefix+"a", fmt.Sprintf("%d", i)); !ok {
			t.Fatal("write failed")
		}
	}
	got := waitWatchedAll(t, s, w, prefix)
	waitProjected(t, s) // the projector has read what is deleted next
	cl, err := kgo.NewClient(kgo.SeedBrokers(st.Broker.Addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p := changelog.Partition(contract.ScopeOf(prefix), partitions)
	end := testenv.EndOffsets(context.Background(), t, cl, st.Broker.Topics.Changes)[p]
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: st.Broker.Topics.Changes, Partition: p, At: end})
	if _, err := kadm.NewClient(cl).DeleteRecords(context.Background(), offs); err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ query, field string }{
		{"prefix=" + prefix + "&after=" + got[2].Cursor, "after"},
		{"key=" + prefix + "a&fromVersion=2", "fromVersion"},
	} {
		resp := openWatch(t, st.URL, devToken, q.query)
		var body contract.ErrorBody
		err := jsonDecode(resp.Body, &body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusGone || body.Error.Code != contract.ECursorExpired || body.Error.Field != q.field {
			t.Fatalf("%s: %d %+v (%v), want 410 cursor_expired on %s", q.query, resp.StatusCode, body, err, q.field)
		}
	}
	var e *contract.Error
	for _, err := range client.New(st.URL, devToken).Watch(t.Context(), client.WatchOptions{Prefix: prefix, After: got[0].Cursor}) {
		if !errorsAs(err, &e) || e.Code != contract.ECursorExpired {
			t.Fatalf("client watch after an expired cursor: %v", err)
		}
		break
	}
	now := startWatch(t, client.New(st.URL, devToken), client.WatchOptions{Prefix: prefix})
	waitWatching(t, s, now, prefix+"b")
}

// TestWatchOutlivesHTTPTimeouts: a watch is a long answer; the server's
// read timeout (1 s) does not cancel it and its write timeout (2 s) does
// not cut it: an event written after 3 s of silence still arrives, with
// the heartbeat comments before it.
func TestWatchOutlivesHTTPTimeouts(t *testing.T) {
	t.Parallel()
	limits := service.HTTPLimits{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: 2 * time.Second, IdleTimeout: time.Second}
	st := inproc.MustRun(t, inproc.Partitions(partitions), inproc.HTTPLimits(limits), inproc.API(api.Config{WatchHeartbeat: 500 * time.Millisecond}))
	s := &stack{tb: t, broker: st.Broker, pg: st.Postgres, store: st.Store, url: st.URL}
	prefix := "tenant/acme/project/long/"
	resp := openWatch(t, st.URL, devToken, "prefix="+prefix)
	defer resp.Body.Close()
	time.Sleep(3 * time.Second) // past both timeouts, with nothing to send but heartbeats
	if _, ok := s.put(prefix+"late", `"still here"`); !ok {
		t.Fatal("write failed")
	}
	sc := bufio.NewScanner(resp.Body)
	pings := 0
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == ": ping":
			pings++
		case strings.HasPrefix(line, "data: "):
			var ev contract.WatchEvent
			if err := jsonUnmarshal(strings.TrimPrefix(line, "data: "), &ev); err != nil || ev.Key != prefix+"late" {
				t.Fatalf("event %q: %v", line, err)
			}
			if pings < 2 {
				t.Fatalf("%d heartbeats in 3 s, want one every 500 ms", pings)
			}
			return
		}
	}
	t.Fatalf("the stream ended before the event: %v", sc.Err())
}

// TestWatchLastEventID: an EventSource's reconnection (the last id it saw
// in Last-Event-ID) resumes like after=, and the stream's opening id is
// the position just before the watch's start.
func TestWatchLastEventID(t *testing.T) {
	t.Parallel()
	st := inproc.MustRun(t, inproc.Partitions(partitions))
	s := &stack{tb: t, broker: st.Broker, pg: st.Postgres, store: st.Store, url: st.URL}
	prefix := "tenant/acme/project/sse/"
	w := startWatch(t, client.New(st.URL, devToken), client.WatchOptions{Prefix: prefix})
	waitWatching(t, s, w, prefix+"a")
	for i := range 3 {
		if _, ok := s.put(prefix+"b", fmt.Sprint(i)); !ok {
			t.Fatal("write failed")
		}
	}
	got := waitWatchedAll(t, s, w, prefix)
	req, err := http.NewRequestWithContext(t.Context(), "GET", st.URL+"/v1/watch?prefix="+prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+devToken)
	req.Header.Set("Last-Event-ID", got[1].Cursor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var ids []string
	for len(ids) < 1+len(got)-2 && sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			ids = append(ids, id)
		}
	}
	want := []string{got[1].Cursor}
	for _, e := range got[2:] {
		want = append(want, e.Cursor)
	}
	if fmt.Sprint(ids) != fmt.Sprint(want) {
		t.Fatalf("ids after Last-Event-ID %s: %v, want the opening id then the later events' %v", got[1].Cursor, ids, want)
	}
}
