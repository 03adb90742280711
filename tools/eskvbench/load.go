package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/tools/internal/localstack"
)

// Targets.
const (
	targetCASP50       = 5 * time.Millisecond
	targetWritesPerSec = 5000
	targetGetP50       = 1 * time.Millisecond
	targetListP99      = 20 * time.Millisecond
	targetLagP99       = 100 * time.Millisecond

	// visibilityTimeout is how long a write may stay invisible in the
	// projection before it counts as lost.
	visibilityTimeout = 10 * time.Second
	// visibilityPoll is the resolution of the visibility check.
	visibilityPoll = 2 * time.Millisecond
	// projectedTimeout bounds the wait for seeded keys to be listed.
	projectedTimeout = 30 * time.Second
)

const tenant = "bench"

type bench struct {
	c        config
	s        *stack
	hc       *http.Client
	auth     string
	progress io.Writer
	runID    string
}

func newBench(c config, s *stack, progress io.Writer) *bench {
	return &bench{c: c, s: s, hc: newHTTPClient(), auth: "Bearer " + s.token, progress: progress, runID: localstack.RandomHex(3)}
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, "eskvbench: "+format+"\n", args...)
}

// projecting reports whether a projector may be running: always with -url,
// where the bench cannot tell.
func (b *bench) projecting() bool { return !b.s.own || b.s.projectorURL != "" }

func (b *bench) key(project, path string) string {
	return "tenant/" + tenant + "/project/" + project + "/" + path
}

// run measures everything (or the figures of -only) in an order that
// reuses state (the list's keys serve the reads) and adds each figure to
// rep.
func (b *bench) run(ctx context.Context, rep *report) error {
	b.logf("run %s against %s", b.runID, b.s.writerURL)
	if b.c.wants("1") {
		b.logf("1/6 CAS writes, 1 client, 1 key, %d ops", b.c.n)
		rep.add(b.casSequential(ctx))
	}
	steps := []struct {
		want bool
		run  func(context.Context, *report) error
	}{
		{b.c.wants("2"), b.writes},
		{b.c.wants("3") || b.c.wants("4"), b.readsAndLists},
		{b.c.wants("19") || b.c.wants("20") || b.c.wants("21"), b.manyReads},
		{b.c.wants("7"), func(ctx context.Context, rep *report) error {
			if b.s.auditor != nil {
				b.logf("7 a second auditor ingests the run's backlog into an empty database")
			}
			rep.add(b.auditorIngest(ctx))
			return nil
		}},
		{true, b.primitives},
		{b.c.wants("12"), b.transactions},
		{b.c.wants("16") || b.c.wants("17"), b.watches},
		{b.c.wants("18"), b.peers},
		{b.c.wants("22"), b.sustain},
		{b.c.wants("11"), func(ctx context.Context, rep *report) error {
			b.logf("11 %d connections of each hostile kind, and one normal client", b.c.robustConns)
			rep.Results = append(rep.Results, b.robust(ctx)...)
			return nil
		}},
		// Last: its load of the projection would disturb the others.
		{b.c.wants("8"), func(ctx context.Context, rep *report) error {
			rep.Results = append(rep.Results, b.scans(ctx)...)
			return nil
		}},
		{b.c.wants("13"), func(ctx context.Context, rep *report) error {
			rep.Results = append(rep.Results, b.sets(ctx)...)
			return nil
		}},
		{b.c.wants("14"), func(ctx context.Context, rep *report) error {
			rep.Results = append(rep.Results, b.listRanges(ctx)...)
			return nil
		}},
		{b.c.wants("15"), b.queues},
		{b.c.scale, b.scale},
	}
	for _, st := range steps {
		if err := ctx.Err(); err != nil || !st.want {
			continue
		}
		if err := st.run(ctx, rep); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// writes is figure 2 (with 5 and 7a): concurrent writes spread over the
// partitions, then in one project.
func (b *bench) writes(ctx context.Context, rep *report) error {
	spread, parts := b.spreadProjects()
	b.logf("2/6 %d clients on distinct keys in %d projects (%d partitions), %s", b.c.clients, len(spread), parts, b.c.duration)
	lagBefore := b.scrape(ctx, b.s.projectorURL)
	audBefore := b.scrape(ctx, b.s.auditorURL)
	w, vis, err := b.concurrentWrites(ctx, "2a", spread, true)
	if err != nil {
		return err
	}
	w.Title = fmt.Sprintf("write, %d clients, %d projects / %d partitions", b.c.clients, len(spread), parts)
	rep.add(w)
	rep.add(b.lag(lagBefore, b.scrape(ctx, b.s.projectorURL), w.OpsPerSec))
	rep.add(b.auditorLag(audBefore, b.scrape(ctx, b.s.auditorURL), w.OpsPerSec))
	rep.add(vis)
	if err := ctx.Err(); err != nil {
		return err
	}
	b.logf("2/6 %d clients on distinct keys in one project, %s", b.c.clients, b.c.duration)
	w, _, err = b.concurrentWrites(ctx, "2b", []string{"one-" + b.runID}, false)
	if err != nil {
		return err
	}
	w.Title = fmt.Sprintf("write, %d clients, 1 project / 1 partition", b.c.clients)
	rep.add(w)
	return nil
}

// readsAndLists are figures 3 and 4, on keys seeded under one prefix.
func (b *bench) readsAndLists(ctx context.Context, rep *report) error {
	b.logf("4/6 seeding %d keys under one prefix and waiting until they are projected", b.c.listKeys)
	prefix := b.key("list-"+b.runID, "k/")
	keys, seedErr := b.seed(ctx, prefix)
	var projected time.Duration
	if seedErr == nil && !b.projecting() {
		seedErr = errors.New("no projector")
	}
	if seedErr == nil {
		projected, seedErr = b.waitProjected(ctx, prefix, len(keys))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.c.wants("3") {
		b.logf("3/6 GETs on existing keys: 1 client x %d, then %d clients for %s", b.c.n, b.c.readClients, b.c.readDuration)
		rep.add(b.gets(ctx, "3a", keys, 1))
		rep.add(b.gets(ctx, "3b", keys, b.c.readClients))
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if b.c.wants("4") {
		b.logf("4/6 list of %d keys x %d", len(keys), b.c.listN)
		rep.add(b.lists(ctx, prefix, len(keys), projected, seedErr))
		rep.add(b.listsAfterWrite(ctx, prefix, len(keys), seedErr))
	}
	return nil
}

// writeState is one client's key and what it knows of it.
type writeState struct {
	key     string
	version int64
	seq     int64
	body    []byte
	buf     bytes.Buffer
}

// putAnswer holds the fields of a PUT answer the bench needs: the entry's
// version on 200, the current version on 409.
type putAnswer struct {
	Version int64 `json:"version"`
	Error   *struct {
		Code           string `json:"code"`
		CurrentVersion *int64 `json:"currentVersion"`
	} `json:"error"`
}

// cas writes st.key with expectedVersion = the last version seen. It
// returns the HTTP status; on 200 and 409 st.version is updated.
func (b *bench) cas(ctx context.Context, st *writeState) (int, error) {
	st.seq++
	st.body = append(st.body[:0], `{"value":{"seq":`...)
	st.body = strconv.AppendInt(st.body, st.seq, 10)
	st.body = append(st.body, `},"expectedVersion":`...)
	st.body = strconv.AppendInt(st.body, st.version, 10)
	st.body = append(st.body, '}')
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, b.s.writerURL+"/v1/kv/"+st.key, bytes.NewReader(st.body))
	if err != nil {
		return 0, err
	}
	req.Header["Authorization"] = []string{b.auth}
	req.Header["Content-Type"] = []string{"application/json"}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	st.buf.Reset()
	_, err = st.buf.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	var a putAnswer
	switch resp.StatusCode {
	case http.StatusOK:
		if err := json.Unmarshal(st.buf.Bytes(), &a); err != nil {
			return 0, fmt.Errorf("PUT answer: %w", err)
		}
		st.version = a.Version
	case http.StatusConflict:
		if json.Unmarshal(st.buf.Bytes(), &a) == nil && a.Error != nil && a.Error.CurrentVersion != nil {
			st.version = *a.Error.CurrentVersion
		}
	}
	return resp.StatusCode, nil
}

// errorCounts counts failed requests by HTTP status (0 for transport
// errors).
type errorCounts map[int]int

func (e errorCounts) total() int {
	n := 0
	for _, c := range e {
		n += c
	}
	return n
}

func (e errorCounts) merge(o errorCounts) {
	for k, v := range o {
		e[k] += v
	}
}

// failed reports whether a call answered status and err failed. It
// counts the failure by status and, with pause, backs off after an
// unavailable answer; a call that failed because ctx ended (the run was
// interrupted, not an error of the stack) is not counted, and the callers'
// loops end on ctx.
func (e errorCounts) failed(ctx context.Context, status int, err error, pause bool) bool {
	if err == nil && status == http.StatusOK {
		return false
	}
	if ctx.Err() == nil {
		e[status]++
		if pause {
			backoff(ctx, status)
		}
	}
	return true
}

// timed calls do n times, one after the other, and returns the latencies
// of the calls answered 200, the others counted by status, and the time
// it took; with pauses it backs off after an unavailable answer.
func timed(ctx context.Context, n int, pauses bool, do func() (int, error)) (latencies, errorCounts, time.Duration) {
	lat := make(latencies, 0, n)
	errs := errorCounts{}
	start := time.Now()
	for range n {
		if ctx.Err() != nil {
			break
		}
		t0 := time.Now()
		status, err := do()
		d := time.Since(t0)
		if errs.failed(ctx, status, err, pauses) {
			continue
		}
		lat = append(lat, d)
	}
	return lat, errs, time.Since(start)
}

// loops runs one closed loop per element of calls, each calling its
// function again as soon as it returned, until deadline; it returns the
// latencies of the calls answered 200 (one list per loop), the others
// counted by status (backing off after an unavailable answer), and the
// time it took.
func loops(ctx context.Context, deadline time.Time, calls []func() (int, error)) ([]latencies, errorCounts, time.Duration) {
	lats := make([]latencies, len(calls))
	errs := make([]errorCounts, len(calls))
	var wg sync.WaitGroup
	start := time.Now()
	for i, call := range calls {
		errs[i] = errorCounts{}
		lats[i] = make(latencies, 0, 4096)
		wg.Go(func() {
			for ctx.Err() == nil {
				t0 := time.Now()
				if !t0.Before(deadline) {
					return
				}
				status, err := call()
				d := time.Since(t0)
				if errs[i].failed(ctx, status, err, true) {
					continue
				}
				lats[i] = append(lats[i], d)
			}
		})
	}
	wg.Wait()
	all := errorCounts{}
	for _, e := range errs {
		all.merge(e)
	}
	return lats, all, time.Since(start)
}

// backoff pauses briefly after an unavailable or too_many_requests answer, so a partition that
// is catching up is not hammered.
func backoff(ctx context.Context, status int) {
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests || status == 0 {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// casSequential is figure 1: one client, one key, each PUT expecting the
// version the previous one returned.
func (b *bench) casSequential(ctx context.Context) result {
	st := &writeState{key: b.key("cas-"+b.runID, "counter")}
	lat, errs, elapsed := timed(ctx, b.c.n, true, func() (int, error) { return b.cas(ctx, st) })
	r := newResult("1", "CAS write, 1 client, 1 key", summarize(lat), errs, elapsed)
	r.target(targetP50, targetCASP50)
	return r
}

// spreadProjects picks one project per partition (up to the client count),
// so the clients of figure 2a hit every partition.
func (b *bench) spreadProjects() ([]string, int) {
	projects := b.distinctProjects("spread-"+b.runID, min(b.c.partitions, b.c.clients))
	return projects, len(projects)
}

// distinctProjects names up to n projects <base>-<i> whose scopes fall on
// distinct partitions (fewer when 100n names do not find n partitions).
func (b *bench) distinctProjects(base string, n int) []string {
	seen := map[int32]bool{}
	var projects []string
	for i := 0; len(projects) < n && i < 100*n; i++ {
		p := fmt.Sprintf("%s-%d", base, i)
		part := changelog.Partition("tenant/"+tenant+"/project/"+p, int32(b.c.partitions))
		if !seen[part] {
			seen[part] = true
			projects = append(projects, p)
		}
	}
	return projects
}

// concurrentWrites is figure 2: b.c.clients clients, each CAS-writing its
// own key in projects[i % len] for b.c.duration. With observe it also
// samples every visEvery-th write for end-to-end visibility (figure 5b)
// and records the writer's batch figures.
func (b *bench) concurrentWrites(ctx context.Context, id string, projects []string, observe bool) (result, result, error) {
	var vis *visibility
	if observe && b.s.db != nil && b.projecting() {
		vis = newVisibility(b.s.db)
	}
	visCtx, visCancel := context.WithCancel(ctx)
	defer visCancel()
	visDone := make(chan error, 1)
	if vis != nil {
		go func() { visDone <- vis.run(visCtx) }()
	}
	metricsBefore := b.scrape(ctx, b.s.writerURL)

	calls := make([]func() (int, error), b.c.clients)
	for i := range calls {
		st := &writeState{key: b.key(projects[i%len(projects)], fmt.Sprintf("c%03d", i))}
		n := 0
		calls[i] = func() (int, error) {
			status, err := b.cas(ctx, st)
			if vis != nil && n%b.c.visEvery == 0 && err == nil && status == http.StatusOK {
				vis.offer(visSample{key: st.key, version: st.version, acked: time.Now()})
			}
			n++
			return status, err
		}
	}
	lats, all, elapsed := loops(ctx, time.Now().Add(b.c.duration), calls)
	w := newResult(id, "", summarize(lats...), all, elapsed)
	w.target(targetThroughput, targetWritesPerSec)
	w.Note = b.batchNote(metricsBefore, b.scrape(ctx, b.s.writerURL))

	v := result{Step: "5b", Title: "write → visible in Postgres (sampled)", Verdict: verdictSkip}
	switch {
	case !observe:
	case !b.projecting():
		v.Note = "no projector"
	case vis == nil:
		v.Note = "no projection database (give -postgres-url with -url)"
	default:
		close(vis.in)
		if err := <-visDone; err != nil && ctx.Err() == nil {
			return w, v, fmt.Errorf("visibility check: %w", err)
		}
		sum := summarize(vis.lat)
		v = newResult("5b", v.Title, sum, errorCounts{}, 0)
		v.Ops, v.OpsPerSec = sum.N, 0
		v.Errors = vis.lost
		v.target(targetP99, targetLagP99)
		v.Note = fmt.Sprintf("every %dth write polled every %s; %d not visible within %s; %d not sampled (queue full)",
			b.c.visEvery, visibilityPoll, vis.lost, visibilityTimeout, vis.dropped.Load())
	}
	return w, v, nil
}

// batchNote describes the writer's Kafka transactions between two scrapes
// of its /metrics.
func (b *bench) batchNote(before, after metrics) string {
	sa, ok := after.histogram("eskv_writer_batch_size")
	ta, ok2 := after.histogram("eskv_writer_batch_seconds")
	if !ok || !ok2 {
		return ""
	}
	sb, _ := before.histogram("eskv_writer_batch_size")
	tb, _ := before.histogram("eskv_writer_batch_seconds")
	size, txn := sa.delta(sb), ta.delta(tb)
	if size.total() == 0 {
		return ""
	}
	p50, _ := size.quantile(0.5)
	t50, _ := txn.quantile(0.5)
	t99, over := txn.quantile(0.99)
	return fmt.Sprintf("writer: %.0f txns, batch size p50 ≈%.1f, txn p50 ≈%s p99 %s%s",
		size.total(), p50, fmtSeconds(t50), gtIf(over), fmtSeconds(t99))
}

// lag is figure 5a: the p99 of the projector's lag histogram over the
// observations made during figure 2a.
func (b *bench) lag(before, after metrics, rate float64) result {
	if b.s.projectorURL == "" {
		return result{Step: "5a", Title: "projector lag histogram", Verdict: verdictSkip, Note: "no projector (give -projector-url with -url)"}
	}
	name := b.c.lagMetric
	if _, ok := after.histogram(name); !ok {
		for _, n := range after.histogramNames() {
			if strings.Contains(n, "lag") {
				name = n
				break
			}
		}
	}
	r, over := histogramFigure("5a", "projector lag histogram", b.s.projectorURL, name, before, after)
	if r.Ops == 0 {
		return r
	}
	r.target(targetP99, targetLagP99)
	if over {
		r.Verdict = verdictMiss
	}
	r.Note = fmt.Sprintf("%s: bucket deltas over run 2a at %.0f writes/s, interpolated%s; counts from the event's ts, "+
		"stamped before the writer's Kafka transaction, so it includes the writer's commit time (5b starts at the 200 answer)", name, rate,
		map[bool]string{true: "; p99 beyond the last bucket", false: ""}[over])
	return r
}

// histogramFigure is figure step from histogram name of the service at
// url: p50 and p99 of the observations made between two scrapes (over:
// p99 lies beyond the last bucket), or a skip saying why there are none.
func histogramFigure(step, title, url, name string, before, after metrics) (r result, over bool) {
	r = result{Step: step, Title: title, Verdict: verdictSkip}
	ha, ok := after.histogram(name)
	switch {
	case after == nil:
		r.Note = "could not read " + url + "/metrics"
		return r, false
	case !ok:
		r.Note = fmt.Sprintf("no histogram %s in %s/metrics", name, url)
		return r, false
	}
	hb, _ := before.histogram(name)
	d := ha.delta(hb)
	if d.total() == 0 {
		r.Note = name + " recorded nothing during the run"
		return r, false
	}
	p50, _ := d.quantile(0.5)
	p99, over := d.quantile(0.99)
	r.Ops, r.P50, r.P99, r.Verdict = int(d.total()), seconds(p50), seconds(p99), ""
	return r, over
}

// seed creates b.c.listKeys keys under prefix with 32 clients.
func (b *bench) seed(ctx context.Context, prefix string) ([]string, error) {
	keys := numberedKeys(prefix, b.c.listKeys)
	return keys, b.writeEach(ctx, keys, 0)
}

// numberedKeys are prefix00000, prefix00001, ...: n keys whose byte order
// is their number's.
func numberedKeys(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s%05d", prefix, i)
	}
	return keys
}

// writeEach writes every key once with 32 clients, each write expecting
// version (0: the key is created) and writing {"seq": version+1}, retrying
// a key up to 20 times.
func (b *bench) writeEach(ctx context.Context, keys []string, version int64) error {
	var next atomic.Int64
	var failed atomic.Int64
	var wg sync.WaitGroup
	for range min(32, len(keys)) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(len(keys)) {
					return
				}
				st := &writeState{key: keys[i], version: version, seq: version}
				for try := 0; ; try++ {
					status, err := b.cas(ctx, st)
					if err == nil && status == http.StatusOK {
						break
					}
					if try == 20 || ctx.Err() != nil {
						failed.Add(1)
						break
					}
					backoff(ctx, http.StatusServiceUnavailable)
				}
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		return fmt.Errorf("%d of %d writes failed", n, len(keys))
	}
	return ctx.Err()
}

// waitProjected waits until n live keys under prefix are in the projection:
// through Postgres when the bench has it, else through the list API.
func (b *bench) waitProjected(ctx context.Context, prefix string, n int) (time.Duration, error) {
	start := time.Now()
	for {
		got, err := b.countProjected(ctx, prefix)
		if err == nil && got >= n {
			return time.Since(start), nil
		}
		if time.Since(start) > projectedTimeout {
			if err != nil {
				return 0, fmt.Errorf("waiting for the projection: %w", err)
			}
			return 0, fmt.Errorf("only %d of %d keys projected after %s", got, n, projectedTimeout)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (b *bench) countProjected(ctx context.Context, prefix string) (int, error) {
	if b.s.db != nil {
		// The prefix ends in "/", and "0" is the byte after it.
		end := prefix[:len(prefix)-1] + "0"
		var n int
		err := b.s.db.QueryRow(ctx, `SELECT count(*) FROM kv_entries WHERE live AND key >= $1 AND key < $2`, prefix, end).Scan(&n)
		return n, err
	}
	status, n, err := b.list(ctx, prefix, b.c.listKeys, true)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("list answered %d", status)
	}
	return n, err
}

// list runs one GET /v1/kv; with count it decodes the answer's count,
// otherwise it only reads the body.
func (b *bench) list(ctx context.Context, prefix string, limit int, count bool) (int, int, error) {
	return b.getList(ctx, b.s.writerURL+"/v1/kv?prefix="+prefix+"&limit="+strconv.Itoa(limit), count)
}

// getList runs one GET of a listing URL; with count it decodes the
// answer's count, otherwise it only reads the body.
func (b *bench) getList(ctx context.Context, target string, count bool) (int, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header["Authorization"] = []string{b.auth}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if !count || resp.StatusCode != http.StatusOK {
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, 0, err
	}
	var a struct {
		Count int `json:"count"`
	}
	err = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a.Count, err
}

// lists is figure 4.
func (b *bench) lists(ctx context.Context, prefix string, n int, projected time.Duration, seedErr error) result {
	title := fmt.Sprintf("list %d keys (limit=%d)", n, n)
	if seedErr != nil {
		return result{Step: "4", Title: title, Verdict: verdictSkip, Note: seedErr.Error()}
	}
	status, got, err := b.list(ctx, prefix, n, true)
	if err != nil || status != http.StatusOK || got != n {
		return result{Step: "4", Title: title, Verdict: verdictSkip,
			Note: fmt.Sprintf("first list: status %d, %d items, err %v", status, got, err)}
	}
	lat, errs, elapsed := timed(ctx, b.c.listN, false, func() (int, error) {
		status, _, err := b.list(ctx, prefix, n, false)
		return status, err
	})
	r := newResult("4", title, summarize(lat), errs, elapsed)
	r.target(targetP99, targetListP99)
	r.Note = fmt.Sprintf("seeded keys all projected %s after the last write", projected.Round(time.Millisecond))
	return r
}

// listsAfterWrite is figure 4b: the listing of figure 4, each sent as
// soon as a write under its prefix was acknowledged, so that it waits for
// the projector to apply that write first (Writer.AwaitProjected): what a
// linearizable listing costs over figure 4 where the prefix was written
// just before. Only the listing is timed; no target (it follows the
// projector's lag, figure 5).
func (b *bench) listsAfterWrite(ctx context.Context, prefix string, n int, seedErr error) result {
	title := fmt.Sprintf("list %d keys right after a write under the prefix", n)
	if seedErr != nil {
		return result{Step: "4b", Title: title, Verdict: verdictSkip, Note: seedErr.Error()}
	}
	// Sorted after the seeded keys: the page is still theirs (truncated).
	st := &writeState{key: prefix + "zz-last"}
	errs := errorCounts{}
	lat := make(latencies, 0, b.c.listN)
	start := time.Now()
	for range b.c.listN {
		if ctx.Err() != nil {
			break
		}
		if status, err := b.cas(ctx, st); errs.failed(ctx, status, err, true) {
			continue
		}
		t0 := time.Now()
		status, _, err := b.list(ctx, prefix, n, false)
		d := time.Since(t0)
		if errs.failed(ctx, status, err, true) {
			continue
		}
		lat = append(lat, d)
	}
	r := newResult("4b", title, summarize(lat), errs, time.Since(start))
	r.Note = "each listing waited for the projector to apply the write acknowledged just before it"
	return r
}

// gets is figure 3: GETs of random existing keys, n ops from one client or
// readDuration from several.
func (b *bench) gets(ctx context.Context, id string, keys []string, clients int) result {
	calls := make([]func() (int, error), clients)
	for i := range calls {
		rng := rand.New(rand.NewPCG(uint64(i), 42))
		var buf bytes.Buffer
		calls[i] = func() (int, error) { return b.get(ctx, keys[rng.IntN(len(keys))], &buf) }
	}
	var (
		lats    []latencies
		all     errorCounts
		elapsed time.Duration
	)
	if clients == 1 {
		var lat latencies
		lat, all, elapsed = timed(ctx, b.c.n, true, calls[0])
		lats = []latencies{lat}
	} else {
		lats, all, elapsed = loops(ctx, time.Now().Add(b.c.readDuration), calls)
	}
	r := newResult(id, fmt.Sprintf("GET existing key, %d client%s", clients, map[bool]string{true: "s", false: ""}[clients > 1]),
		summarize(lats...), all, elapsed)
	r.target(targetP50, targetGetP50)
	return r
}

func (b *bench) get(ctx context.Context, key string, buf *bytes.Buffer) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.s.writerURL+"/v1/kv/"+key, nil)
	if err != nil {
		return 0, err
	}
	req.Header["Authorization"] = []string{b.auth}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, err
	}
	buf.Reset()
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// visSample is a write acknowledged at acked that the projection must show.
type visSample struct {
	key     string
	version int64
	acked   time.Time
}

// visibility measures how long acknowledged writes take to show up in the
// projection: one goroutine polls Postgres for every pending sample at
// once, every visibilityPoll, so the check costs one query per poll
// however many samples wait.
type visibility struct {
	db      *pgxpool.Pool
	in      chan visSample
	lat     latencies
	lost    int
	dropped atomic.Int64
}

func newVisibility(db *pgxpool.Pool) *visibility {
	return &visibility{db: db, in: make(chan visSample, 4096)}
}

func (v *visibility) offer(s visSample) {
	select {
	case v.in <- s:
	default:
		v.dropped.Add(1)
	}
}

// run checks samples until in is closed and every sample is visible or
// lost.
func (v *visibility) run(ctx context.Context) error {
	in := v.in
	var pending []visSample
	tick := time.NewTicker(visibilityPoll)
	defer tick.Stop()
	keys := make([]string, 0, 256)
	versions := map[string]int64{}
	for {
		for drained := false; !drained && in != nil; {
			select {
			case s, ok := <-in:
				if !ok {
					in = nil
					break
				}
				pending = append(pending, s)
			default:
				drained = true
			}
		}
		if in == nil && len(pending) == 0 {
			return nil
		}
		if len(pending) > 0 {
			keys = keys[:0]
			clear(versions)
			for _, s := range pending {
				if _, ok := versions[s.key]; !ok {
					versions[s.key] = 0
					keys = append(keys, s.key)
				}
			}
			rows, err := v.db.Query(ctx, `SELECT key, version FROM kv_entries WHERE key = ANY($1)`, keys)
			if err != nil {
				return err
			}
			for rows.Next() {
				var k string
				var ver int64
				if err := rows.Scan(&k, &ver); err != nil {
					rows.Close()
					return err
				}
				versions[k] = ver
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			now := time.Now()
			kept := pending[:0]
			for _, s := range pending {
				switch {
				case versions[s.key] >= s.version:
					v.lat = append(v.lat, now.Sub(s.acked))
				case now.Sub(s.acked) > visibilityTimeout:
					v.lost++
				default:
					kept = append(kept, s)
				}
			}
			pending = kept
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}
