package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// Reads answer their position (issue P4, items 1 and 2): a listing's
// position followed by a watch after it is exactly the changes after the
// listing; a GET's position is exactly the state it answered; the pages
// of one listing are one snapshot, that of its first page.

// positionSkew is added to every position the tests use: 0, always, in
// the repository. Setting it to 1 (a deliberate off-by-one) makes
// TestListThenWatchExact and TestGetPositionExact fail, which shows they
// check the positions' exactness.
const positionSkew = 0

// listed is a whole listing, every page followed: its entries by key and
// the position every page answered.
type listed struct {
	entries map[string]contract.Entry
	at      contract.Cursor
	pages   int
}

// listAt lists prefix through base in pages of limit entries (q: extra
// query), checking that every page answers the first page's position,
// and calling between (if set) after each page.
func listAt(t *testing.T, base, prefix string, limit int, q string, between func()) (listed, error) {
	t.Helper()
	out := listed{entries: map[string]contract.Entry{}}
	cursor, position := "", ""
	for {
		u := fmt.Sprintf("%s/v1/kv?prefix=%s&limit=%d%s", base, url.QueryEscape(prefix), limit, q)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		r, err := call("GET", u, "")
		if err != nil {
			return listed{}, err
		}
		if r.Status != http.StatusOK {
			return listed{}, fmt.Errorf("list %s: %d %s", prefix, r.Status, r.Body)
		}
		var a contract.ListAnswer
		if err := json.Unmarshal(r.Body, &a); err != nil {
			return listed{}, err
		}
		if position == "" {
			position = a.Position
		}
		if a.Position == "" || a.Position != position || r.Header.Get("ESKV-Position") != a.Position {
			t.Fatalf("page %d answers position %q (header %q), the first page %q", out.pages, a.Position, r.Header.Get("ESKV-Position"), position)
		}
		out.pages++
		for _, e := range a.Items {
			out.entries[e.Key] = e
		}
		if !a.Truncated {
			break
		}
		cursor = a.NextCursor
		if between != nil {
			between()
		}
	}
	at, err := contract.ParseCursor(position, "position")
	if err != nil {
		t.Fatal(err)
	}
	at.Offset += positionSkew
	out.at = at
	return out, nil
}

// foldLog folds the events of log (one partition's, in order) at offsets
// up to at: the live state of each key then, its latest event.
func foldLog(t *testing.T, log []logged, at int64) map[string]contract.Event {
	t.Helper()
	out := map[string]contract.Event{}
	for _, l := range log {
		c, err := contract.ParseCursor(l.cursor, "cursor")
		if err != nil {
			t.Fatal(err)
		}
		if c.Offset > at {
			break
		}
		if l.event.Live() {
			out[l.event.Key] = l.event
		} else {
			delete(out, l.event.Key)
		}
	}
	return out
}

// assertIsFold checks that entries (key -> entry) are the fold: the same
// keys, each with the fold's version and value.
func assertIsFold(t *testing.T, what string, entries map[string]contract.Entry, fold map[string]contract.Event) {
	t.Helper()
	for k, e := range entries {
		ev, ok := fold[k]
		if !ok {
			t.Fatalf("%s: %s@%d is listed, the fold of the log has no such key", what, k, e.Version)
		}
		if ev.Version != e.Version || string(ev.After) != string(e.Value) {
			t.Fatalf("%s: %s listed at version %d %s, the fold has version %d %s", what, k, e.Version, e.Value, ev.Version, ev.After)
		}
	}
	for k, ev := range fold {
		if _, ok := entries[k]; !ok {
			t.Fatalf("%s: %s@%d is in the fold of the log, not listed", what, k, ev.Version)
		}
	}
}

// churn runs n clients that put and delete keys k0..k<keys-1> under prefix
// through urls (in turn) until stopped; a client whose writer restarts
// waits a little.
func churn(t *testing.T, urls []string, prefix string, n, keys int, done *atomic.Int64) (stop func()) {
	return runClients(t, n, func(c, i int) {
		base := urls[(c+i)%len(urls)]
		key := fmt.Sprintf("%sk%03d", prefix, (c*7+i*13)%keys)
		var r response
		var err error
		if i%5 == 4 {
			r, err = callOnce("DELETE", base+"/v1/kv/"+key, "")
		} else {
			r, err = callOnce("PUT", base+"/v1/kv/"+key, fmt.Sprintf(`{"value":{"c":%d,"i":%d,"state":"%c"}}`, c, i, 'a'+rune(i%2)))
		}
		if err != nil || r.Status >= 500 {
			time.Sleep(20 * time.Millisecond) // a writer is restarting
			return
		}
		done.Add(1)
	})
}

// callOnce sends one request with the dev token, with a short timeout.
func callOnce(method, u, body string) (response, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+devToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := shortClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	return response{Status: resp.StatusCode, Header: resp.Header}, nil
}

// listThenWatch lists prefix through lister and watches it after the
// listing's position through watcher.
func listThenWatch(t *testing.T, lister string, watcher *client.Client, prefix string) (listed, *watchRecorder) {
	t.Helper()
	var l listed
	testenv.WaitFor(t, 60*time.Second, "a listing of "+prefix, func() bool {
		var err error
		l, err = listAt(t, lister, prefix, 7, "", nil)
		return err == nil
	})
	return l, startWatch(t, watcher, client.WatchOptions{Prefix: prefix, After: l.at.String()})
}

// assertListThenWatch checks one list-then-watch against the log of the
// prefix (the only one written on its partition): the listing is the
// fold of the log up to its position; the watch received exactly the
// log's events after it (no gap, no duplicate); and the listing with the
// watched events folded in is final, the listing of the end.
func assertListThenWatch(t *testing.T, what string, log []logged, l listed, got []contract.WatchEvent, final listed) {
	t.Helper()
	assertIsFold(t, what+": the listing", l.entries, foldLog(t, log, l.at.Offset))
	var after []logged
	for _, e := range log {
		if c, _ := contract.ParseCursor(e.cursor, "cursor"); c.Offset > l.at.Offset {
			after = append(after, e)
		}
	}
	if len(got) != len(after) {
		t.Fatalf("%s: watched %d events after %s, the log holds %d", what, len(got), l.at, len(after))
	}
	state := map[string]contract.Entry{}
	for k, e := range l.entries {
		state[k] = e
	}
	for i, w := range got {
		if w.Cursor != after[i].cursor || w.Key != after[i].event.Key || w.Version != after[i].event.Version {
			t.Fatalf("%s: watched event %d is %s %s@%d, the log's is %s %s@%d", what, i, w.Cursor, w.Key, w.Version,
				after[i].cursor, after[i].event.Key, after[i].event.Version)
		}
		if e, ok := state[w.Key]; ok && e.Version >= w.Version {
			t.Fatalf("%s: watched %s@%d, already listed at version %d: a duplicate", what, w.Key, w.Version, e.Version)
		}
		if w.Kind == contract.KindPut {
			state[w.Key] = contract.Entry{Key: w.Key, Version: w.Version, Value: w.Value}
		} else {
			delete(state, w.Key)
		}
	}
	fold := map[string]contract.Event{}
	for k, e := range final.entries {
		fold[k] = contract.Event{Key: k, Version: e.Version, Kind: contract.KindPut, After: e.Value}
	}
	assertIsFold(t, what+": the listing and the watch folded", state, fold)
}

// TestListThenWatchExact: two writers as processes, 8 clients putting and
// deleting 40 keys of one prefix through both; a listing (pages of 7)
// followed by a watch after its position, twice, each time across a
// restart of a writer (kill -9). Each listing is the fold of the log up
// to its position, each watch receives exactly the log's events after it,
// and listing plus watch fold to the final listing.
func TestListThenWatchExact(t *testing.T) {
	t.Parallel()
	ws := mustWriterProcs(t, 2)
	ws.url = ws.urls[0]
	prefix := "tenant/acme/project/listwatch/k/"
	watcher := client.New(ws.urls[1], devToken, client.WithRetries(5, 20*time.Millisecond, 200*time.Millisecond))
	var done atomic.Int64
	stop := churn(t, ws.urls, prefix, 8, 40, &done)
	type round struct {
		l listed
		w *watchRecorder
	}
	var rounds []round
	for k := range 2 {
		target := done.Load() + 300
		testenv.WaitFor(t, 60*time.Second, "writes", func() bool { return done.Load() >= target })
		l, w := listThenWatch(t, ws.urls[0], watcher, prefix)
		rounds = append(rounds, round{l, w})
		target = done.Load() + 300
		testenv.WaitFor(t, 60*time.Second, "writes", func() bool { return done.Load() >= target })
		ws.writers[0].Kill()
		mustStart(t, ws.writers[0])
		waitHTTP(t, ws.urls[0]+"/readyz", 60*time.Second)
		t.Logf("round %d: listed %d keys in %d pages at %s", k, len(l.entries), l.pages, l.at)
	}
	target := done.Load() + 300
	testenv.WaitFor(t, 60*time.Second, "writes", func() bool { return done.Load() >= target })
	stop()
	final, err := listAt(t, ws.urls[0], prefix, 1000, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	log := ws.prefixLog(t.Context(), prefix)
	for i, r := range rounds {
		got := waitWatchedAll(t, ws.stack, r.w, prefix)
		assertListThenWatch(t, fmt.Sprintf("round %d", i), log, r.l, got, final)
		t.Logf("round %d: %d events watched after %s", i, len(got), r.l.at)
	}
}

// TestGetPositionExact: while 8 clients change 10 keys, every GET's
// answer (ESKV-Position) is the key's state in the fold of the log up to
// its position: the version and value of the key's last event at or
// before it, or 404 when that was a delete.
func TestGetPositionExact(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	prefix := "tenant/acme/project/getpos/k/"
	var done atomic.Int64
	stop := churn(t, []string{s.url}, prefix, 8, 10, &done)
	type read struct {
		key     string
		at      contract.Cursor
		version int64 // 0: 404
		value   string
	}
	var reads []read
	for i := range 400 {
		key := fmt.Sprintf("%sk%03d", prefix, i%10)
		r := s.do("GET", "/v1/kv/"+key, devToken, nil)
		at, err := contract.ParseCursor(r.Header.Get("ESKV-Position"), "position")
		if err != nil || (r.Status != http.StatusOK && r.Status != http.StatusNotFound) {
			t.Fatalf("GET %s: %d %s, position %q", key, r.Status, r.Body, r.Header.Get("ESKV-Position"))
		}
		at.Offset += positionSkew
		x := read{key: key, at: at}
		if r.Status == http.StatusOK {
			e := r.entry(t)
			x.version, x.value = e.Version, string(e.Value)
		}
		reads = append(reads, x)
	}
	stop()
	waitProjected(t, s)
	log := s.prefixLog(t.Context(), prefix)
	for _, x := range reads {
		ev, ok := foldLog(t, log, x.at.Offset)[x.key]
		if !ok && x.version != 0 || ok && (ev.Version != x.version || string(ev.After) != x.value) {
			t.Fatalf("GET %s at %s answered version %d %s; the fold of the log there: %v version %d %s",
				x.key, x.at, x.version, x.value, ok, ev.Version, ev.After)
		}
	}
	t.Logf("%d GETs, each the fold of the log at its position; %d writes", len(reads), done.Load())
}

// TestListingPagesOneSnapshot: while 16 clients put and delete 200 keys
// of a prefix, listings in pages of 10 (unfiltered, and filtered on
// state = a), writes landing between the pages, are each the state the
// fold of the log gives at their first page's position.
func TestListingPagesOneSnapshot(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	prefix := "tenant/acme/project/pages/k/"
	var done atomic.Int64
	stop := churn(t, []string{s.url}, prefix, 16, 200, &done)
	testenv.WaitFor(t, 60*time.Second, "writes", func() bool { return done.Load() >= 400 })
	rng := rand.New(rand.NewPCG(4, 2))
	pause := func() { time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) }
	var lists, filtered []listed
	for range 3 {
		l, err := listAt(t, s.url, prefix, 10, "", pause)
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, l)
		f, err := listAt(t, s.url, prefix, 10, "&field=state&op=eq&value=a", pause)
		if err != nil {
			t.Fatal(err)
		}
		filtered = append(filtered, f)
	}
	stop()
	waitProjected(t, s)
	log := s.prefixLog(t.Context(), prefix)
	for i, l := range lists {
		assertIsFold(t, fmt.Sprintf("listing %d", i), l.entries, foldLog(t, log, l.at.Offset))
		t.Logf("listing %d: %d keys in %d pages at %s", i, len(l.entries), l.pages, l.at)
	}
	for i, l := range filtered {
		fold := foldLog(t, log, l.at.Offset)
		for k, ev := range fold {
			if !strings.Contains(string(ev.After), `"state":"a"`) {
				delete(fold, k)
			}
		}
		assertIsFold(t, fmt.Sprintf("filtered listing %d", i), l.entries, fold)
		t.Logf("filtered listing %d: %d keys in %d pages at %s", i, len(l.entries), l.pages, l.at)
	}
	t.Logf("%d writes meanwhile", done.Load())
}

// TestListingSnapshotExpired: the second page of a listing answers as of
// its first page's position from the history (keys written since keep
// their value then, a key deleted since is still there); once the
// history's retention removed those versions, the same cursor answers
// 410 snapshot_expired. A cursor without a position (from a release
// before positions) answers the latest state.
func TestListingSnapshotExpired(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	prefix := "tenant/acme/project/expire/k/"
	names := []string{"a", "b", "c", "d", "e", "f"}
	putAll(t, s.url, prefix, names, func(int) string { return `{"value":1}` })
	first := listPrefix(t, s.url, prefix, "&limit=3")
	if !first.Truncated || first.Position == "" || !strings.HasPrefix(first.NextCursor, first.Position+".") {
		t.Fatalf("first page: %+v", first)
	}
	putAll(t, s.url, prefix, names[3:5], func(int) string { return `{"value":2}` })
	if r := s.do("DELETE", "/v1/kv/"+prefix+"f", devToken, nil); r.Status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	waitProjected(t, s)
	second := listPrefix(t, s.url, prefix, "&limit=3&cursor="+url.QueryEscape(first.NextCursor))
	if got := fmt.Sprint(keysOf(second, prefix)); got != "[d e f]" || second.Position != first.Position {
		t.Fatalf("second page: %s at %s, want [d e f] at %s", got, second.Position, first.Position)
	}
	for _, e := range second.Items {
		if string(e.Value) != "1" || e.Version != 1 {
			t.Fatalf("second page: %s@%d = %s, want version 1 = 1", e.Key, e.Version, e.Value)
		}
	}
	// An old cursor (the key alone): the latest state.
	_, old, _ := strings.Cut(first.NextCursor[len(first.Position):], ".")
	latest := listPrefix(t, s.url, prefix, "&limit=3&cursor="+old)
	if got := fmt.Sprint(keysOf(latest, prefix)); got != "[d e]" || latest.Position == first.Position {
		t.Fatalf("old cursor: %s at %s, want [d e] at a later position", got, latest.Position)
	}
	p, _ := retainer(t, s, projection.Retention{MaxVersions: 1})
	if n, err := p.PruneHistory(t.Context(), time.Now()); err != nil || n != 3 {
		t.Fatalf("retention run: %d rows, %v; want 3", n, err)
	}
	r, err := call("GET", s.url+"/v1/kv?prefix="+prefix+"&limit=3&cursor="+url.QueryEscape(first.NextCursor), "")
	if err != nil || r.Status != http.StatusGone || r.errorBody(t).Code != contract.ESnapshotExpired {
		t.Fatalf("after the retention: %v %d %s, want 410 snapshot_expired", err, r.Status, r.Body)
	}
}
