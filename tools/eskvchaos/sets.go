package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// The set workload: -set-clients clients add and remove members of a few
// sets (docs/collections.md), each sadd and srem with a requestId of its
// own, and ask sismember now and then, through random writers, under the
// faults. The checks: every change answered 200 with added or removed
// true is its event in the log (the same member and op); each set's
// metadata size equals the fold of its element changes at every event;
// and, once the projection holds the whole log, each set's members there
// (kv_elements from its since on) equal that fold. Overlapping
// projectors after a rebalance (-projectors 2 under kills) are where an
// element change could be applied out of order.
const (
	setCount   = 2 // sets of the workload
	setMembers = 8 // the members each client picks from: adds and removes race
)

// setKeys are the sets of the workload, in a project of their own.
func setKeys() []string {
	k := make([]string, setCount)
	for i := range k {
		k[i] = fmt.Sprintf("tenant/chaos/project/sets/set-%d", i)
	}
	return k
}

// setChange is an acknowledged change: its set, version, op and member.
type setChange struct {
	key     string
	version int64
	op      string // events.ElementAdd or ElementRemove
	member  string
}

// setWorkload runs the set clients and records what they were answered.
type setWorkload struct {
	c    *clients
	keys []string

	mu       sync.Mutex
	outcomes map[string]int // changed, unchanged, member, not_member, failed, unknown
	acked    []setChange
}

func newSetWorkload(c *clients) *setWorkload {
	return &setWorkload{c: c, keys: setKeys(), outcomes: map[string]int{}}
}

// run starts n clients and returns once stop is closed and each finished
// its current operation.
func (s *setWorkload) run(n int, seed uint64, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for id := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(2000+id)))
		wg.Go(func() { s.client(id, rng, stop) })
	}
	wg.Wait()
}

func (s *setWorkload) client(id int, rng *rand.Rand, stop <-chan struct{}) {
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		key, member := s.keys[rng.IntN(len(s.keys))], fmt.Sprintf("m %d/é", rng.IntN(setMembers))
		base := s.c.urls[rng.IntN(len(s.c.urls))] + "/v1/kv/" + key
		var outcome string
		switch r := rng.IntN(10); {
		case r < 2:
			outcome = s.isMember(base, member)
		default:
			op := events.OpSAdd
			if r >= 6 {
				op = events.OpSRem
			}
			outcome = s.change(base, key, op, member, fmt.Sprintf("chaos-set-c%d-%d", id, seq))
		}
		if outcome == "failed" || outcome == "unknown" {
			pause(stop, 20*time.Millisecond+time.Duration(rng.IntN(30))*time.Millisecond)
		}
	}
}

// change sends an sadd or srem and records its outcome.
func (s *setWorkload) change(base, key string, op events.Op, member, requestID string) string {
	body, _ := json.Marshal(events.MemberBody{Member: member, RequestID: requestID})
	a := s.c.do(http.MethodPost, base+":"+op.Verb(), body)
	var ans events.SetChangeAnswer
	outcome := "unknown"
	switch {
	case a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &ans) == nil:
		outcome = "unchanged"
		if (ans.Added != nil && *ans.Added) || (ans.Removed != nil && *ans.Removed) {
			outcome = "changed"
		}
	default:
		if o, _ := classifyWrite(a, ""); o.Outcome == linz.Failed {
			outcome = "failed" // refused before it was queued
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[outcome]++
	if outcome == "changed" {
		el := events.ElementAdd
		if op == events.OpSRem {
			el = events.ElementRemove
		}
		s.acked = append(s.acked, setChange{key: key, version: ans.Version, op: el, member: member})
	}
	return outcome
}

// isMember asks sismember and records the answer (not checked: a
// membership test is a read of the owner, as GET, whose linearizability
// the register workload checks).
func (s *setWorkload) isMember(base, member string) string {
	a := s.c.do(http.MethodGet, base+":sismember?member="+url.QueryEscape(member), nil)
	var ans events.IsMemberAnswer
	outcome := "unknown"
	if a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &ans) == nil {
		outcome = "not_member"
		if ans.IsMember {
			outcome = "member"
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[outcome]++
	return outcome
}

// setFindings are the set workload's results and checks.
type setFindings struct {
	outcomes map[string]int
	events   int
	// missing: an acknowledged change that is not its event in the log;
	// sizes: an event whose metadata size is not the fold's; projected:
	// a set whose members in the projection are not the fold's.
	missing, sizes, projected []string
}

func (f *setFindings) violations() []string { return slices.Concat(f.missing, f.sizes, f.projected) }

// check folds the sets' element changes of the log and checks the
// acknowledged changes, the metadata and, when projected is set, the
// projection's members.
func (s *setWorkload) check(ctx context.Context, evs []logcheck.Event, db *pgxpool.Pool, projected bool) (setFindings, error) {
	s.mu.Lock()
	f := setFindings{outcomes: s.outcomes}
	acked := slices.Clone(s.acked)
	s.mu.Unlock()
	byKey := eventsOf(evs, s.keys)
	type at struct {
		key     string
		version int64
	}
	inLog := map[at]events.Element{}
	folds := map[string]map[string]bool{}
	for key, es := range byKey {
		fold := map[string]bool{}
		for _, e := range es {
			f.events++
			if e.Element == nil {
				f.sizes = append(f.sizes, fmt.Sprintf("%s@%d has no element change", key, e.Version))
				continue
			}
			inLog[at{key, e.Version}] = *e.Element
			if e.Element.Op == events.ElementAdd {
				fold[e.Element.Member] = true
			} else {
				delete(fold, e.Element.Member)
			}
			if meta, err := events.ParseCollectionMeta(e.After); err != nil || meta.Size != int64(len(fold)) {
				f.sizes = append(f.sizes, fmt.Sprintf("%s@%d: metadata %s, but the fold holds %d members", key, e.Version, e.After, len(fold)))
			}
		}
		folds[key] = fold
	}
	for _, a := range acked {
		if el, ok := inLog[at{a.key, a.version}]; !ok || el.Op != a.op || el.Member != a.member {
			f.missing = append(f.missing, fmt.Sprintf("acknowledged %s of %q in %s at version %d: the log has %+v there", a.op, a.member, a.key, a.version, el))
		}
	}
	if !projected {
		return f, nil
	}
	for _, key := range s.keys {
		rows, err := db.Query(ctx, `SELECT el.member FROM kv_elements el JOIN kv_entries e ON e.key = el.collection
			WHERE el.collection = $1 AND e.live AND el.version >= (e.value::jsonb->>'since')::bigint ORDER BY el.member`, key)
		if err != nil {
			return f, fmt.Errorf("members of %s: %w", key, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return f, fmt.Errorf("members of %s: %w", key, err)
		}
		want := make([]string, 0, len(folds[key]))
		for m := range folds[key] {
			want = append(want, m)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			f.projected = append(f.projected, fmt.Sprintf("%s: the projection holds %q, the log implies %q", key, got, want))
		}
	}
	return f, nil
}

// print prints the set workload's line and its violations.
func (f *setFindings) print(w io.Writer) {
	n, by := countBy(f.outcomes)
	v := f.violations()
	fmt.Fprintf(w, "sets: %d violations (%d requests: %s; %d events in the log; %d acknowledged changes not in it, %d metadata sizes off, %d sets differing in the projection)\n",
		len(v), n, by, f.events, len(f.missing), len(f.sizes), len(f.projected))
	printFirst(w, v)
}

// eventsOf returns the events of the log whose key is one of keys, per
// key in version order: what a collection workload folds.
func eventsOf(evs []logcheck.Event, keys []string) map[string][]events.Event {
	byKey := map[string][]events.Event{}
	for _, le := range evs {
		if slices.Contains(keys, le.Event.Key) {
			byKey[le.Event.Key] = append(byKey[le.Event.Key], le.Event)
		}
	}
	for _, es := range byKey {
		slices.SortFunc(es, func(a, b events.Event) int { return cmp.Compare(a.Version, b.Version) })
	}
	return byKey
}
