package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
)

// Figure 13: sismember on a set of 1,000 members and on one of 1,000,000
// (docs/collections.md). A membership test is one primary-key probe of
// kv_elements, so its latency should not depend on the set's size: 13b
// is compared with 13a.
const (
	targetSetP50 = time.Millisecond // as a GET (figure 3a)
	setSmall     = 1000
	setLarge     = 1000000
)

// sets is figure 13. Both sets are loaded straight into the projection:
// the set's entry through projection.Store.Apply (a synthetic sadd event
// whose metadata says the size, as the projector would apply it) and its
// members by one INSERT ... SELECT from generate_series (a million sadds
// through the writer would take minutes), then ANALYZE kv_elements (what
// autovacuum does within a minute). The writer has never seen the sets:
// every sismember reads the set's entry and probes the member in
// Postgres, its slowest path.
func (b *bench) sets(ctx context.Context) []result {
	steps := []struct {
		step string
		n    int
	}{{"13a", setSmall}, {"13b", setLarge}}
	out := make([]result, 0, len(steps))
	for _, st := range steps {
		title := fmt.Sprintf("sismember on a set of %s members (half present), 1 client", thousands(st.n))
		switch {
		case !b.s.own:
			out = append(out, result{Step: st.step, Title: title, Verdict: verdictSkip, Note: "only on the bench's own stack: it loads the set straight into the projection"})
			continue
		case b.s.db == nil:
			out = append(out, result{Step: st.step, Title: title, Verdict: verdictSkip, Note: "no projection database"})
			continue
		}
		set := b.key("sets-"+b.runID, fmt.Sprintf("members-%d", st.n))
		b.logf("%s loading a set of %d members straight into the projection", st.step, st.n)
		loaded, err := b.loadSet(ctx, set, st.n)
		if err != nil {
			out = append(out, result{Step: st.step, Title: title, Verdict: verdictSkip, Note: "loading the set: " + err.Error()})
			continue
		}
		b.logf("%s sismember x %d", st.step, b.c.n)
		rng := rand.New(rand.NewPCG(uint64(st.n), 13))
		var buf bytes.Buffer
		var wrong int
		lat, errs, elapsed := timed(ctx, b.c.n, false, func() (int, error) {
			i := rng.IntN(st.n)
			member, want := setMember(i), true
			if rng.IntN(2) == 0 {
				member, want = "absent-"+setMember(i), false
			}
			status, got, err := b.isMember(ctx, set, member, &buf)
			if err == nil && status == http.StatusOK && got != want {
				wrong++
			}
			return status, err
		})
		r := newResult(st.step, title, summarize(lat), errs, elapsed)
		r.target(targetP50, targetSetP50)
		r.Note = fmt.Sprintf("GET /v1/kv/{set}:sismember?member=; the set was loaded straight into Postgres in %s "+
			"(its entry with projection.Store.Apply, its members with one INSERT ... SELECT generate_series, then ANALYZE kv_elements)",
			loaded.Round(time.Millisecond))
		if wrong > 0 {
			r.Verdict, r.Note = verdictMiss, fmt.Sprintf("%d answers were wrong; %s", wrong, r.Note)
		}
		if len(out) == 1 && out[0].P50 > 0 {
			r.Note += fmt.Sprintf("; p50 %.2fx that of 13a", float64(r.P50)/float64(out[0].P50))
		}
		out = append(out, r)
		if ctx.Err() != nil {
			break
		}
	}
	return out
}

// setMember is the i-th member of a loaded set: byte order is i's order.
func setMember(i int) string { return fmt.Sprintf("member-%08d", i) }

// loadSet writes the set key with n members into the projection and
// returns how long it took.
func (b *bench) loadSet(ctx context.Context, set string, n int) (time.Duration, error) {
	start := time.Now()
	k, err := events.ParseKey(set)
	if err != nil {
		return 0, err
	}
	now := time.Now().UTC()
	meta, _ := json.Marshal(events.CollectionMeta{Type: events.PurposeSet, Size: int64(n), Since: 1})
	e := events.Event{
		SchemaVersion: events.SchemaVersion, Key: set, Scope: k.Scope(), Version: 1, Kind: events.KindPut, Op: events.OpSAdd,
		Before: json.RawMessage("null"), After: meta, CreatedAt: now, TS: now, Principal: "eskvbench",
		Semantics: events.Semantics{Purpose: events.PurposeSet, Producer: "eskvbench"},
		Element:   &events.Element{Op: events.ElementAdd, Member: setMember(0)},
	}
	part := events.Partition(k.Scope(), int32(b.c.partitions))
	if err := projection.New(b.s.db).Apply(ctx, scanTopic, []projection.Applied{{Partition: part, Offset: int64(n), Event: e}}); err != nil {
		return 0, err
	}
	if _, err := b.s.db.Exec(ctx, `INSERT INTO kv_elements (collection, member, version)
		SELECT $1, 'member-' || lpad(i::text, 8, '0'), 1 FROM generate_series(1, $2 - 1) AS i`, set, n); err != nil {
		return 0, err
	}
	if _, err := b.s.db.Exec(ctx, `ANALYZE kv_elements`); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// isMember asks sismember of member in set.
func (b *bench) isMember(ctx context.Context, set, member string, buf *bytes.Buffer) (status int, in bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.s.writerURL+"/v1/kv/"+set+":sismember?member="+url.QueryEscape(member), nil)
	if err != nil {
		return 0, false, err
	}
	req.Header["Authorization"] = []string{b.auth}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, false, err
	}
	defer resp.Body.Close()
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return resp.StatusCode, false, err
	}
	var a events.IsMemberAnswer
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(buf.Bytes(), &a); err != nil {
			return resp.StatusCode, false, err
		}
	}
	return resp.StatusCode, a.IsMember, nil
}
