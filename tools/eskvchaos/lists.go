package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection/elemkey"
)

// The list workload: -list-clients clients push at both ends of a few
// lists, pop from both ends and trim them (ltrim 0 9), each write with a
// requestId of its own, through random writers, under the faults. The
// checks: every write answered 200 is its event in the log (the same
// op, and for a push the value sent, for a pop the value answered); at
// every event the list's metadata size equals the fold of the log and a
// pop's value is the fold's end; and, once the projection holds the
// whole log, each list's values there (the rows of its positions head ..
// head+size-1) equal that fold.
const listCount = 2

// listWorkloadKeys are the lists of the workload, in a project of their own.
func listWorkloadKeys() []string { return workloadKeys("lists", "list", listCount) }

// listChange is an acknowledged list write: its list, version, op and
// the value pushed or popped ("" for a trim).
type listChange struct {
	key     string
	version int64
	op      contract.Op
	value   string
}

// listWorkload runs the list clients and records what they were
// answered: outcomes applied, empty, failed, unknown.
type listWorkload struct {
	collectionWorkload[listChange]
}

func newListWorkload(c *clients) *listWorkload {
	return &listWorkload{newCollectionWorkload[listChange](c, listWorkloadKeys(), 3000)}
}

// run starts n clients and returns once stop is closed and each finished
// its current operation.
func (s *listWorkload) run(n int, seed uint64, stop <-chan struct{}) {
	s.collectionWorkload.run(n, seed, stop, func(id, seq int, rng *rand.Rand, key, base string) string {
		rid := fmt.Sprintf("chaos-list-c%d-%d", id, seq)
		var op contract.Op
		var body any
		switch r := rng.IntN(20); {
		case r < 8:
			op, body = contract.OpRPush, contract.PushBody{Value: json.RawMessage(fmt.Sprintf(`"c%d-%d"`, id, seq)), RequestID: rid}
		case r < 12:
			op, body = contract.OpLPush, contract.PushBody{Value: json.RawMessage(fmt.Sprintf(`"c%d-%d"`, id, seq)), RequestID: rid}
		case r < 15:
			op, body = contract.OpLPop, contract.PopBody{RequestID: rid}
		case r < 18:
			op, body = contract.OpRPop, contract.PopBody{RequestID: rid}
		default:
			start, stop := int64(0), int64(9)
			op, body = contract.OpLTrim, contract.TrimBody{Start: &start, Stop: &stop, RequestID: rid}
		}
		// Half the pops block (blockingWait) until a value arrives.
		return s.write(base, key, op, body, (op == contract.OpLPop || op == contract.OpRPop) && rng.IntN(2) == 0)
	})
}

// write sends one list write (a pop that waits for a value with wait)
// and records its outcome.
func (s *listWorkload) write(base, key string, op contract.Op, body any, wait bool) string {
	var ans contract.ListChangeAnswer
	url := base + ":" + op.Verb()
	if wait {
		url += blockingWait
	}
	outcome, _ := s.post(url, body, &ans)
	if outcome == "ok" {
		outcome = "applied"
	}
	if wait {
		outcome += " after a wait"
	}
	// A trim that kept everything appended nothing: its version is an
	// earlier event's, not checked.
	if !strings.HasPrefix(outcome, "applied") || op == contract.OpLTrim {
		s.record(outcome)
		return outcome
	}
	s.record(outcome, listChange{key: key, version: ans.Version, op: op, value: string(ans.Value)})
	return outcome
}

// listFindings are the list workload's results and checks.
type listFindings struct {
	collectionFindings
	// missing: an acknowledged write that is not its event in the log;
	// folds: an event whose metadata or popped value is not the fold's;
	// projected: a list whose values in the projection are not the fold's.
	missing, folds, projected []string
}

func (f *listFindings) violations() []string { return slices.Concat(f.missing, f.folds, f.projected) }

// check folds the lists' events of the log and checks the acknowledged
// writes, the metadata, the popped values and, when projected is set,
// the projection's values.
func (s *listWorkload) check(ctx context.Context, evs []logcheck.Event, db *pgxpool.Pool, projected bool) (listFindings, error) {
	var f listFindings
	outcomes, acked := s.snapshot()
	f.outcomes = outcomes
	inLog := map[keyVersion]contract.Event{}
	folds := map[string][]string{}
	for key, es := range eventsOf(evs, s.keys) {
		for _, e := range es {
			inLog[keyVersion{key, e.Version}] = e
		}
		f.events += len(es)
		folds[key] = f.fold(key, es)
	}
	for _, a := range acked {
		e, ok := inLog[keyVersion{a.key, a.version}]
		if !ok || e.Op != a.op || e.Element == nil || (a.value != "" && string(e.Element.Value) != a.value) {
			f.missing = append(f.missing, fmt.Sprintf("acknowledged %s of %s in %s at version %d: the log has %s %+v there", a.op, a.value, a.key, a.version, e.Op, e.Element))
		}
	}
	if !projected {
		return f, nil
	}
	for _, key := range s.keys {
		got, err := projectedList(ctx, db, key)
		if err != nil {
			return f, err
		}
		want := folds[key]
		if want == nil {
			want = []string{}
		}
		if !slices.Equal(got, want) {
			f.projected = append(f.projected, fmt.Sprintf("%s: the projection holds %q, the log implies %q", key, got, want))
		}
	}
	return f, nil
}

// fold applies the list key's events es in order, noting in f.folds an
// event whose metadata or popped value is not the fold's, and returns the
// list's values after them.
func (f *listFindings) fold(key string, es []contract.Event) []string {
	var fold []string
	for _, e := range es {
		meta, err := contract.ParseCollectionMeta(e.After)
		if err != nil {
			f.folds = append(f.folds, fmt.Sprintf("%s@%d: metadata %s: %v", key, e.Version, e.After, err))
			continue
		}
		var value string
		if e.Element != nil {
			value = string(e.Element.Value)
		}
		switch e.Op {
		case contract.OpLPush:
			fold = append([]string{value}, fold...)
		case contract.OpRPush:
			fold = append(fold, value)
		case contract.OpLPop, contract.OpRPop:
			i := 0
			if e.Op == contract.OpRPop {
				i = len(fold) - 1
			}
			if len(fold) == 0 || fold[i] != value {
				f.folds = append(f.folds, fmt.Sprintf("%s@%d: %s popped %s, the fold holds %q", key, e.Version, e.Op, value, fold))
				continue
			}
			fold = slices.Delete(fold, i, i+1)
		case contract.OpLTrim:
			fold = fold[:min(len(fold), int(meta.Size))]
		}
		if meta.Size != int64(len(fold)) {
			f.folds = append(f.folds, fmt.Sprintf("%s@%d: metadata %s, but the fold holds %d values", key, e.Version, e.After, len(fold)))
		}
	}
	return fold
}

// projectedList reads the values of the list key from the projection:
// the rows of its positions head .. head+size-1 (none when it is not
// live).
func projectedList(ctx context.Context, db *pgxpool.Pool, key string) ([]string, error) {
	var raw []byte
	err := db.QueryRow(ctx, `SELECT value FROM kv_entries WHERE key = $1 AND live`, key).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", key, err)
	}
	meta, err := contract.ParseCollectionMeta(raw)
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, `SELECT value FROM kv_elements WHERE collection = $1 AND member BETWEEN $2 AND $3 ORDER BY member`,
		key, elemkey.ListPosition(meta.Head), elemkey.ListPosition(meta.Head+meta.Size-1))
	if err != nil {
		return nil, fmt.Errorf("values of %s: %w", key, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("values of %s: %w", key, err)
	}
	if got == nil {
		got = []string{}
	}
	return got, nil
}

// print prints the list workload's line and its violations.
func (f *listFindings) print(w io.Writer) {
	f.collectionFindings.print(w, "lists", f.violations(), fmt.Sprintf("%d acknowledged writes not in it, %d folds off, %d lists differing in the projection",
		len(f.missing), len(f.folds), len(f.projected)))
}
