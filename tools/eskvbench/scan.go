package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// Figure 8: filtered scans (GET /v1/kv with field, op and value) over
// -scan-entries entries under one prefix, each returning a page of 100.
const (
	targetScanP99 = 20 * time.Millisecond
	scanPage      = 100
	// scanTopic names the synthetic events in projector_offsets, apart
	// from kv.changes: the stack's projector never sees them.
	scanTopic = "eskvbench.synthetic"
	scanBatch = 1000
)

// scanCase is one filtered scan of figure 8.
type scanCase struct {
	step, title string
	query       url.Values // field, op, value
}

// scanValue is the value of job i of n in figure 8: state "failed" for 1
// in 1,000 (few match), updated_at more than five minutes old for 1 in
// 100 (the sweeper's match), attempt i % 10 (half match attempt lt 5).
func scanValue(i int, now time.Time) string {
	state := "done"
	switch {
	case i%1000 == 500:
		state = "failed"
	case i%2 == 1:
		state = "running"
	}
	updated := now.Add(-time.Duration(i%240) * time.Second) // the last four minutes
	if i%100 == 50 {
		updated = now.Add(-time.Hour)
	}
	return fmt.Sprintf(`{"state":%q,"attempt":%d,"owner":"worker-%d","updated_at":%q}`,
		state, i%10, i%37, updated.UTC().Format(time.RFC3339))
}

// scans is figure 8. It loads the entries straight into the projection
// (projection.Store.Apply with synthetic put events, as the projector
// would apply them, but not through the writer and Kafka: 100,000 writes
// would take most of a minute), then times -scan-n requests of each case
// through the API.
func (b *bench) scans(ctx context.Context) []result {
	n := b.c.scanEntries
	cases := []scanCase{
		{"8a", "few match: state eq failed (1 in 1,000)", url.Values{"field": {"state"}, "op": {"eq"}, "value": {"failed"}}},
		{"8b", "sweeper: updated_at lt now-5m (1 in 100)", nil},
		{"8c", "half match: attempt lt 5", url.Values{"field": {"attempt"}, "op": {"lt"}, "value": {"5"}}},
	}
	skip := func(note string) []result {
		out := make([]result, len(cases))
		for i, c := range cases {
			out[i] = result{Step: c.step, Title: scanTitle(c.title, n), Verdict: verdictSkip, Note: note}
		}
		return out
	}
	switch {
	case !b.s.own:
		return skip("only on the bench's own stack: it loads synthetic entries straight into the projection")
	case b.s.db == nil:
		return skip("no projection database")
	}

	now := time.Now()
	prefix := b.key("scan-"+b.runID, "jobs/")
	cases[1].query = url.Values{"field": {"updated_at"}, "op": {"lt"}, "value": {now.Add(-5 * time.Minute).UTC().Format(time.RFC3339)}}
	b.logf("8 filtered scans: loading %d entries straight into the projection", n)
	loaded, err := b.loadScanEntries(ctx, prefix, n, now)
	if err != nil {
		return skip("loading the entries: " + err.Error())
	}
	// What autovacuum does within a minute of such a load: statistics for
	// the planner, and the visibility map, without which index-only scans
	// read the heap too (scans then take about twice as long).
	if _, err := b.s.db.Exec(ctx, `VACUUM ANALYZE kv_fields`); err != nil {
		return skip("VACUUM ANALYZE kv_fields: " + err.Error())
	}

	out := make([]result, 0, len(cases))
	for _, c := range cases {
		b.logf("%s %s x %d", c.step, c.title, b.c.scanN)
		out = append(out, b.scanCase(ctx, c, prefix, n, loaded))
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

func scanTitle(title string, n int) string {
	return fmt.Sprintf("filtered scan over %s entries returning %d, %s", thousands(n), scanPage, title)
}

// scanFields are the fields figures 8 and 23 scan. Their projects
// declare them first (docs/api.md, "Filtered scans": a field not
// declared is scanned from the values, a budget of them per page), and
// the figures wait until they are ready; figure 18 declares nothing, as
// its peers have no field indexes.
var scanFields = []string{"attempt", "state", "updated_at"}

// declarationEvent is the put of scope's field-index declaration of
// scanFields.
func declarationEvent(scope string, now time.Time) *contract.Event {
	v, _ := json.Marshal(contract.FieldIndexes{Fields: scanFields})
	e := scaleEvent(contract.FieldIndexesKey(scope), scope, 0, now)
	e.After = v
	return e
}

// awaitFieldsReady waits until the stack's projector has built every
// field the scopes declare.
func (b *bench) awaitFieldsReady(ctx context.Context, scopes []string) error {
	store := projection.New(b.s.db)
	deadline := time.Now().Add(scaleLoadTimeout)
	for _, scope := range scopes {
		for {
			fi, err := store.FieldIndexes(ctx, scope)
			if err != nil {
				return err
			}
			ready := len(fi) == len(scanFields)
			for _, f := range fi {
				ready = ready && f.Ready
			}
			if ready {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("the field indexes of %s are not ready after %s: %+v", scope, scaleLoadTimeout, fi)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

// loadScanEntries applies the declaration of scanFields and n synthetic
// put events under prefix in batches of scanBatch, waits until the
// fields are ready, and returns how long it took.
func (b *bench) loadScanEntries(ctx context.Context, prefix string, n int, now time.Time) (time.Duration, error) {
	start := time.Now()
	store := projection.New(b.s.db)
	k, err := contract.ParseKey(prefix + "x")
	if err != nil {
		return 0, err
	}
	part := changelog.Partition(k.Scope(), int32(b.c.partitions))
	batch := make([]projection.Applied, 0, scanBatch)
	batch = append(batch, projection.Applied{Partition: part, Offset: int64(n), Event: *declarationEvent(k.Scope(), now)})
	for i := range n {
		e := scaleEvent(fmt.Sprintf("%s%06d", prefix, i), k.Scope(), i, now)
		batch = append(batch, projection.Applied{Partition: part, Offset: int64(i), Event: *e})
		if len(batch) == scanBatch || i == n-1 {
			if err := store.Apply(ctx, scanTopic, batch); err != nil {
				return 0, err
			}
			batch = batch[:0]
		}
	}
	if err := b.awaitFieldsReady(ctx, []string{k.Scope()}); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// scanCase times b.c.scanN scans of c through the API; the first must
// return a full page.
func (b *bench) scanCase(ctx context.Context, c scanCase, prefix string, n int, loaded time.Duration) result {
	title := scanTitle(c.title, n)
	q := url.Values{"prefix": {prefix}, "limit": {strconv.Itoa(scanPage)}}
	for k, v := range c.query {
		q[k] = v
	}
	target := b.s.writerURL + "/v1/kv?" + q.Encode()
	status, got, err := b.getList(ctx, target, true)
	if err != nil || status != http.StatusOK || got == 0 {
		return result{Step: c.step, Title: title, Verdict: verdictSkip,
			Note: fmt.Sprintf("first scan: status %d, %d items, err %v", status, got, err)}
	}
	lat, errs, elapsed := timed(ctx, b.c.scanN, false, func() (int, error) {
		status, _, err := b.getList(ctx, target, false)
		return status, err
	})
	r := newResult(c.step, title, summarize(lat), errs, elapsed)
	r.target(targetP99, targetScanP99)
	r.Note = fmt.Sprintf("GET /v1/kv?%s (%d items), 1 client; the %s entries were loaded straight into Postgres with "+
		"projection.Store.Apply (synthetic put events, not through the writer and Kafka) in %s, then VACUUM ANALYZE kv_fields "+
		"(as autovacuum would within a minute)",
		q.Encode(), got, thousands(n), loaded.Round(time.Millisecond))
	return r
}

// thousands formats n with commas: 100,000.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
