package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/writer"
)

// conflictWriter answers every write version_conflict, as a partition's
// owner deciding a stale expectedVersion does.
type conflictWriter struct{ fakeWriter }

func (*conflictWriter) Do(context.Context, decide.Command) (writer.Result, error) {
	return writer.Result{}, contract.Errorf(contract.EConflict, "expected version 9, key is at 1")
}

// consoleWriters runs n writers sharing the UI key, the peer secret (nil:
// none) and a projection holding project acme/a, each advertising its
// own URL; it returns their URLs.
func consoleWriters(t *testing.T, store *projection.Store, n int, secret []byte) []string {
	t.Helper()
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for range n {
		hs := httptest.NewUnstartedServer(nil)
		u := "http://" + hs.Listener.Addr().String()
		s, err := api.New(api.Config{Tokens: tokens, UIKey: []byte("a status page key of 32 bytes at least"), PeerSecret: secret, AdvertiseURL: u},
			&conflictWriter{}, store, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		hs.Config.Handler = s.Handler()
		hs.Start()
		t.Cleanup(hs.Close)
		urls = append(urls, u)
	}
	return urls
}

// consoleGet gets url with the session cookie and decodes it into out.
func consoleGet(t *testing.T, url string, ck *http.Cookie, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.AddCookie(ck)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestUIConflictsAcrossWriters: two writers each decide some of a
// project's conflicts (3 and 2); the chart and the overview answer 5 on
// both, whichever is asked, listing both writers as answered and a third
// of the owners table that is down as not answering. Without a shared
// peer secret the peers are not asked (and say so). A request without a
// writer's proof is refused the peers' route.
func TestUIConflictsAcrossWriters(t *testing.T) {
	t.Parallel()
	store := projection.New(testenv.MustPostgres(t))
	ts := time.Now()
	e := contract.Event{SchemaVersion: contract.SchemaVersion, Key: "tenant/acme/project/a/k", Scope: "tenant/acme/project/a", Version: 1,
		Kind: contract.KindPut, Op: contract.OpSet, After: json.RawMessage(`1`), CreatedAt: ts, TS: ts, Principal: "dev", WriterEpoch: 1}
	if err := store.Apply(t.Context(), "kv.changes", []projection.Applied{{Partition: 0, Event: e}}); err != nil {
		t.Fatal(err)
	}
	urls := consoleWriters(t, store, 2, []byte("a peer secret of thirty-two bytes or more"))
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for i, u := range append(urls, down.URL) {
		if err := store.SetOwner(t.Context(), int32(i), "w", u, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range []int{3, 2} {
		for range n {
			req, _ := http.NewRequest("PUT", urls[i]+"/v1/kv/tenant/acme/project/a/k", strings.NewReader(`{"value":2,"expectedVersion":9}`))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusConflict {
				t.Fatalf("PUT on writer %d: %d, want 409", i, resp.StatusCode)
			}
		}
	}
	h := httptestHandler(urls[0])
	ck := uiClient{t}.login(h)
	for i, u := range urls {
		var c api.ConflictRates
		consoleGet(t, u+"/ui/api/conflicts?prefix=tenant/acme/project/a/", ck, &c)
		var o api.UIOverview
		consoleGet(t, u+"/ui/api/overview", ck, &o)
		if c.Total != 5 || len(o.Projects) != 1 || o.Projects[0].Conflicts == nil || *o.Projects[0].Conflicts != 5 {
			t.Fatalf("writer %d: chart total %d, overview %+v; want 5 conflicts on both", i, c.Total, o.Projects)
		}
		if got := peersText(c.Writers); got != "answered,down,self" {
			t.Fatalf("writer %d: writers %s (%+v), want itself, its peer answered and the one down not", i, got, c.Writers)
		}
	}
	t.Log("5 conflicts (3 on writer 0, 2 on writer 1) on both writers' chart and overview")
	req, _ := http.NewRequest("GET", urls[1]+"/ui/api/peer/conflicts", nil)
	req.AddCookie(ck)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the peers' route without a writer's proof: %v %v, want 403", resp.StatusCode, err)
	}
}

// TestUIConflictsWithoutPeerSecret: writers that share no peer secret
// cannot prove their requests to each other: the chart is this writer's
// alone and says which writers were not asked.
func TestUIConflictsWithoutPeerSecret(t *testing.T) {
	t.Parallel()
	store := projection.New(testenv.MustPostgres(t))
	urls := consoleWriters(t, store, 2, nil)
	for i, u := range urls {
		if err := store.SetOwner(t.Context(), int32(i), "w", u, 1); err != nil {
			t.Fatal(err)
		}
	}
	ck := uiClient{t}.login(httptestHandler(urls[0]))
	var c api.ConflictRates
	consoleGet(t, urls[0]+"/ui/api/conflicts?prefix=tenant/acme/project/a/", ck, &c)
	if len(c.Writers) != 2 || c.Writers[1].Answered || !strings.Contains(c.Writers[1].Error, "no peer secret") {
		t.Fatalf("writers %+v: want the peer marked not asked (no peer secret)", c.Writers)
	}
}

// peersText is "self" or "answered" or "down" for each writer, sorted.
func peersText(ps []api.UIPeer) string {
	var out []string
	for _, p := range ps {
		switch {
		case p.Self:
			out = append(out, "self")
		case p.Answered:
			out = append(out, "answered")
		default:
			out = append(out, "down")
		}
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// httptestHandler sends requests to the server at url (for uiClient's
// login, which takes a handler).
type httptestHandler string

func (u httptestHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, _ := http.NewRequest(r.Method, string(u)+r.URL.RequestURI(), r.Body)
	req.Header = r.Header.Clone()
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		_, _ = w.Write(buf[:n])
		if err != nil {
			return
		}
	}
}

// statementTracer records the SQL of every statement a pool sends.
type statementTracer struct {
	mu  sync.Mutex
	sql []string
}

func (st *statementTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.sql = append(st.sql, d.SQL)
	return ctx
}

func (*statementTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// during is the statements sent while f ran: all of them, and those
// that read kv_history (the overview's activity).
func (st *statementTracer) during(f func()) (all, history int) {
	st.mu.Lock()
	from := len(st.sql)
	st.mu.Unlock()
	f()
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, sql := range st.sql[from:] {
		if strings.Contains(sql, "kv_history") {
			history++
		}
	}
	return len(st.sql) - from, history
}

// TestUIOverviewActivityOneStatement: the overview reads the activity of
// its page's projects in one statement, however many it lists (it sent
// one per project, two statements each): a page of 1 and a page of 7
// cost Postgres as many statements, and each project still has its own
// writes over the window and last change (an empty project none).
func TestUIOverviewActivityOneStatement(t *testing.T) {
	t.Parallel()
	db := testenv.MustPostgresDB(t)
	cfg, err := pgxpool.ParseConfig(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	tr := &statementTracer{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	store := projection.New(pool)
	now := time.Now().UTC().Truncate(time.Microsecond)
	var batch []projection.Applied
	offsets := map[int32]int64{}
	for i := range 7 {
		scope := fmt.Sprintf("tenant/acme/project/p%d", i)
		part := changelog.Partition(scope, 4) // the test writers' partition of the scope
		for v := range int64(i + 1) {
			// p6's keys were written before the window: none counts.
			ts := now.Add(-time.Duration(v) * time.Second)
			if i == 6 {
				ts = now.Add(-time.Hour - time.Duration(v)*time.Second)
			}
			key := fmt.Sprintf("%s/k%d", scope, v)
			batch = append(batch, projection.Applied{Partition: part, Offset: offsets[part], Event: contract.Event{SchemaVersion: contract.SchemaVersion,
				Key: key, Scope: scope, Version: 1, Kind: contract.KindPut, Op: contract.OpSet, After: json.RawMessage(`1`),
				CreatedAt: ts, TS: ts, Principal: "dev", WriterEpoch: 1}})
			offsets[part]++
		}
	}
	if err := store.Apply(t.Context(), "kv.changes", batch); err != nil {
		t.Fatal(err)
	}
	urls := consoleWriters(t, store, 1, nil)
	ck := uiClient{t}.login(httptestHandler(urls[0]))
	var one, seven api.UIOverview
	all1, hist1 := tr.during(func() { consoleGet(t, urls[0]+"/ui/api/overview?limit=1", ck, &one) })
	all7, hist7 := tr.during(func() { consoleGet(t, urls[0]+"/ui/api/overview", ck, &seven) })
	if len(one.Projects) != 1 || len(seven.Projects) != 7 {
		t.Fatalf("overviews of %d and %d projects, want 1 and 7", len(one.Projects), len(seven.Projects))
	}
	for i, op := range seven.Projects {
		want, last := int64(i+1), now
		if i == 6 {
			want, last = 0, now.Add(-time.Hour)
		}
		if op.Project != fmt.Sprintf("p%d", i) || op.Writes != want || op.WritesPerMinute != float64(want)/5 || op.LastChange == nil || !op.LastChange.Equal(last) {
			t.Errorf("project %d: %+v, want %d writes over the window, last change at %v", i, op, want, last)
		}
	}
	t.Logf("statements per overview: %d for 1 project (%d of kv_history), %d for 7 (%d of kv_history)", all1, hist1, all7, hist7)
	if hist1 != 1 || hist7 != 1 || all7 != all1 {
		t.Fatalf("statements per overview: %d for 1 project (%d of kv_history), %d for 7 (%d of kv_history); want the same, one of kv_history",
			all1, hist1, all7, hist7)
	}
}
