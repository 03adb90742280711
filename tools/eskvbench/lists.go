package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
)

// Figure 14: lrange 0 99 on a list of 1,000 values and on one of
// 1,000,000 (docs/collections.md). A range is the list's metadata and
// one range scan of kv_elements' primary key over 100 positions, so its
// latency should not depend on the list's length: 14b is compared with
// 14a.
const (
	targetRangeP50 = 2 * time.Millisecond // a read that waits for the projection, as a listing
	listSmall      = 1000
	listLarge      = 1000000
	rangeN         = 100
)

// listRanges is figure 14. Both lists are loaded straight into the projection:
// the list's entry through projection.Store.Apply (a synthetic rpush event
// whose metadata says the length) and its values by one INSERT ... SELECT
// from generate_series at positions 0 .. n-1 (events.ListPosition in SQL:
// lpad of position + 2^63), then ANALYZE kv_elements. Every lrange is
// answered from Postgres (AwaitProjected returns at once: the writer
// acknowledged nothing of these lists).
func (b *bench) listRanges(ctx context.Context) []result {
	steps := []struct {
		step string
		n    int
	}{{"14a", listSmall}, {"14b", listLarge}}
	out := make([]result, 0, len(steps))
	for _, st := range steps {
		title := fmt.Sprintf("lrange 0 %d on a list of %s values, 1 client", rangeN-1, thousands(st.n))
		switch {
		case !b.s.own:
			out = append(out, result{Step: st.step, Title: title, Verdict: verdictSkip, Note: "only on the bench's own stack: it loads the list straight into the projection"})
			continue
		case b.s.db == nil:
			out = append(out, result{Step: st.step, Title: title, Verdict: verdictSkip, Note: "no projection database"})
			continue
		}
		list := b.key("lists-"+b.runID, fmt.Sprintf("values-%d", st.n))
		b.logf("%s loading a list of %d values straight into the projection", st.step, st.n)
		loaded, err := b.loadList(ctx, list, st.n)
		if err != nil {
			out = append(out, result{Step: st.step, Title: title, Verdict: verdictSkip, Note: "loading the list: " + err.Error()})
			continue
		}
		b.logf("%s lrange x %d", st.step, b.c.n)
		var buf bytes.Buffer
		var wrong int
		lat, errs, elapsed := timed(ctx, b.c.n, false, func() (int, error) {
			status, a, err := b.lrange(ctx, list, &buf)
			if err == nil && status == http.StatusOK && (len(a.Values) != rangeN || string(a.Values[rangeN-1]) != fmt.Sprintf(`"v%d"`, rangeN-1)) {
				wrong++
			}
			return status, err
		})
		r := newResult(st.step, title, summarize(lat), errs, elapsed)
		r.target(targetP50, targetRangeP50)
		r.Note = fmt.Sprintf("GET /v1/kv/{list}:lrange?start=0&stop=%d; the list was loaded straight into Postgres in %s "+
			"(its entry with projection.Store.Apply, its values with one INSERT ... SELECT generate_series, then ANALYZE kv_elements)",
			rangeN-1, loaded.Round(time.Millisecond))
		if wrong > 0 {
			r.Verdict, r.Note = verdictMiss, fmt.Sprintf("%d answers were wrong; %s", wrong, r.Note)
		}
		if len(out) == 1 && out[0].P50 > 0 {
			r.Note += fmt.Sprintf("; p50 %.2fx that of 14a", float64(r.P50)/float64(out[0].P50))
		}
		out = append(out, r)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// loadList writes the list key with n values ("v0" .. "v<n-1>") into the
// projection and returns how long it took.
func (b *bench) loadList(ctx context.Context, list string, n int) (time.Duration, error) {
	start := time.Now()
	k, err := events.ParseKey(list)
	if err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	meta, _ := json.Marshal(events.CollectionMeta{Type: events.PurposeList, Size: int64(n), Since: 1})
	e := events.Event{
		SchemaVersion: events.SchemaVersion, Key: list, Scope: k.Scope(), Version: 1, Kind: events.KindPut, Op: events.OpRPush,
		Before: json.RawMessage("null"), After: meta, CreatedAt: now, TS: now, Principal: "eskvbench",
		Semantics: events.Semantics{Purpose: events.PurposeList, Producer: "eskvbench"},
		Element:   &events.Element{Op: events.ElementAdd, Member: events.ListPosition(0), Value: json.RawMessage(`"v0"`)},
	}
	part := events.Partition(k.Scope(), int32(b.c.partitions))
	if err := projection.New(b.s.db).Apply(ctx, scanTopic, []projection.Applied{{Partition: part, Offset: int64(n), Event: e}}); err != nil {
		return 0, err
	}
	// Position i is ListPosition(i): i + 2^63 in 20 digits.
	if _, err := b.s.db.Exec(ctx, `INSERT INTO kv_elements (collection, member, version, value)
		SELECT $1, lpad((i::numeric + 9223372036854775808)::text, 20, '0'), 1, '"v' || i || '"' FROM generate_series(1, $2 - 1) AS i`, list, n); err != nil {
		return 0, err
	}
	if _, err := b.s.db.Exec(ctx, `ANALYZE kv_elements`); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// lrange asks lrange 0 rangeN-1 of list.
func (b *bench) lrange(ctx context.Context, list string, buf *bytes.Buffer) (status int, a events.RangeAnswer, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/v1/kv/%s:lrange?start=0&stop=%d", b.s.writerURL, list, rangeN-1), nil)
	if err != nil {
		return 0, a, err
	}
	req.Header["Authorization"] = []string{b.auth}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, a, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return resp.StatusCode, a, err
	}
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(buf.Bytes(), &a)
	}
	return resp.StatusCode, a, err
}
