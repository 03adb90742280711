package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
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
func setKeys() []string { return workloadKeys("sets", "set", setCount) }

// setChange is an acknowledged change: its set, version, op and member.
type setChange struct {
	key     string
	version int64
	op      string // contract.ElementAdd or ElementRemove
	member  string
}

// setWorkload runs the set clients and records what they were answered:
// outcomes changed, unchanged, member, not_member, failed, unknown.
type setWorkload struct {
	collectionWorkload[setChange]
}

func newSetWorkload(c *clients) *setWorkload {
	return &setWorkload{newCollectionWorkload[setChange](c, setKeys(), 2000)}
}

// run starts n clients and returns once stop is closed and each finished
// its current operation.
func (s *setWorkload) run(n int, seed uint64, stop <-chan struct{}) {
	s.collectionWorkload.run(n, seed, stop, func(id, seq int, rng *rand.Rand, key, base string) string {
		member := fmt.Sprintf("m %d/é", rng.IntN(setMembers))
		switch r := rng.IntN(10); {
		case r < 2:
			return s.isMember(base, member)
		case r < 6:
			return s.change(base, key, contract.OpSAdd, member, fmt.Sprintf("chaos-set-c%d-%d", id, seq))
		default:
			return s.change(base, key, contract.OpSRem, member, fmt.Sprintf("chaos-set-c%d-%d", id, seq))
		}
	})
}

// change sends an sadd or srem and records its outcome.
func (s *setWorkload) change(base, key string, op contract.Op, member, requestID string) string {
	var ans contract.SetChangeAnswer
	outcome, _ := s.post(base+":"+op.Verb(), contract.MemberBody{Member: member, RequestID: requestID}, &ans)
	switch outcome {
	case "ok":
		outcome = "unchanged"
		if (ans.Added != nil && *ans.Added) || (ans.Removed != nil && *ans.Removed) {
			outcome = "changed"
		}
	case "empty":
		outcome = "unknown"
	}
	if outcome != "changed" {
		s.record(outcome)
		return outcome
	}
	el := contract.ElementAdd
	if op == contract.OpSRem {
		el = contract.ElementRemove
	}
	s.record(outcome, setChange{key: key, version: ans.Version, op: el, member: member})
	return outcome
}

// isMember asks sismember and records the answer (not checked: a
// membership test is a read of the owner, as GET, whose linearizability
// the register workload checks).
func (s *setWorkload) isMember(base, member string) string {
	a := s.c.do(http.MethodGet, base+":sismember?member="+url.QueryEscape(member), nil)
	var ans contract.IsMemberAnswer
	outcome := "unknown"
	if a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &ans) == nil {
		outcome = "not_member"
		if ans.IsMember {
			outcome = "member"
		}
	}
	s.record(outcome)
	return outcome
}

// setFindings are the set workload's results and checks.
type setFindings struct {
	collectionFindings
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
	var f setFindings
	outcomes, acked := s.snapshot()
	f.outcomes = outcomes
	byKey := eventsOf(evs, s.keys)
	inLog := map[keyVersion]contract.Element{}
	folds := map[string]map[string]bool{}
	for key, es := range byKey {
		fold := map[string]bool{}
		for _, e := range es {
			f.events++
			if e.Element == nil {
				f.sizes = append(f.sizes, fmt.Sprintf("%s@%d has no element change", key, e.Version))
				continue
			}
			inLog[keyVersion{key, e.Version}] = *e.Element
			if e.Element.Op == contract.ElementAdd {
				fold[e.Element.Member] = true
			} else {
				delete(fold, e.Element.Member)
			}
			if meta, err := contract.ParseCollectionMeta(e.After); err != nil || meta.Size != int64(len(fold)) {
				f.sizes = append(f.sizes, fmt.Sprintf("%s@%d: metadata %s, but the fold holds %d members", key, e.Version, e.After, len(fold)))
			}
		}
		folds[key] = fold
	}
	for _, a := range acked {
		if el, ok := inLog[keyVersion{a.key, a.version}]; !ok || el.Op != a.op || el.Member != a.member {
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
	f.collectionFindings.print(w, "sets", f.violations(), fmt.Sprintf("%d acknowledged changes not in it, %d metadata sizes off, %d sets differing in the projection",
		len(f.missing), len(f.sizes), len(f.projected)))
}
