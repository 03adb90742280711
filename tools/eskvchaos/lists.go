package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
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
func listWorkloadKeys() []string {
	k := make([]string, listCount)
	for i := range k {
		k[i] = fmt.Sprintf("tenant/chaos/project/lists/list-%d", i)
	}
	return k
}

// listChange is an acknowledged list write: its list, version, op and
// the value pushed or popped ("" for a trim).
type listChange struct {
	key     string
	version int64
	op      events.Op
	value   string
}

// listWorkload runs the list clients and records what they were answered.
type listWorkload struct {
	c    *clients
	keys []string

	mu       sync.Mutex
	outcomes map[string]int // applied, empty, failed, unknown
	acked    []listChange
}

func newListWorkload(c *clients) *listWorkload {
	return &listWorkload{c: c, keys: listWorkloadKeys(), outcomes: map[string]int{}}
}

// run starts n clients and returns once stop is closed and each finished
// its current operation.
func (s *listWorkload) run(n int, seed uint64, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for id := range n {
		rng := rand.New(rand.NewPCG(seed, uint64(3000+id)))
		wg.Go(func() { s.client(id, rng, stop) })
	}
	wg.Wait()
}

func (s *listWorkload) client(id int, rng *rand.Rand, stop <-chan struct{}) {
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		key := s.keys[rng.IntN(len(s.keys))]
		base := s.c.urls[rng.IntN(len(s.c.urls))] + "/v1/kv/" + key
		rid := fmt.Sprintf("chaos-list-c%d-%d", id, seq)
		var op events.Op
		var body any
		switch r := rng.IntN(20); {
		case r < 8:
			op, body = events.OpRPush, events.PushBody{Value: json.RawMessage(fmt.Sprintf(`"c%d-%d"`, id, seq)), RequestID: rid}
		case r < 12:
			op, body = events.OpLPush, events.PushBody{Value: json.RawMessage(fmt.Sprintf(`"c%d-%d"`, id, seq)), RequestID: rid}
		case r < 15:
			op, body = events.OpLPop, events.PopBody{RequestID: rid}
		case r < 18:
			op, body = events.OpRPop, events.PopBody{RequestID: rid}
		default:
			start, stop := int64(0), int64(9)
			op, body = events.OpLTrim, events.TrimBody{Start: &start, Stop: &stop, RequestID: rid}
		}
		outcome := s.write(base, key, op, body)
		if outcome == "failed" || outcome == "unknown" {
			pause(stop, 20*time.Millisecond+time.Duration(rng.IntN(30))*time.Millisecond)
		}
	}
}

// write sends one list write and records its outcome.
func (s *listWorkload) write(base, key string, op events.Op, body any) string {
	b, _ := json.Marshal(body)
	a := s.c.do(http.MethodPost, base+":"+op.Verb(), b)
	var ans events.ListChangeAnswer
	outcome := "unknown"
	switch {
	case a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &ans) == nil:
		outcome = "applied"
	case a.err == nil && a.status == http.StatusNotFound:
		outcome = "empty"
	default:
		if o, _ := classifyWrite(a, ""); o.Outcome == linz.Failed {
			outcome = "failed" // refused before it was queued
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[outcome]++
	// A trim that kept everything appended nothing: its version is an
	// earlier event's, not checked.
	if outcome == "applied" && op != events.OpLTrim {
		s.acked = append(s.acked, listChange{key: key, version: ans.Version, op: op, value: string(ans.Value)})
	}
	return outcome
}

// listFindings are the list workload's results and checks.
type listFindings struct {
	outcomes map[string]int
	events   int
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
	s.mu.Lock()
	f := listFindings{outcomes: s.outcomes}
	acked := slices.Clone(s.acked)
	s.mu.Unlock()
	byKey := eventsOf(evs, s.keys)
	type at struct {
		key     string
		version int64
	}
	inLog := map[at]events.Event{}
	folds := map[string][]string{}
	for key, es := range byKey {
		var fold []string
		for _, e := range es {
			f.events++
			inLog[at{key, e.Version}] = e
			meta, err := events.ParseCollectionMeta(e.After)
			if err != nil {
				f.folds = append(f.folds, fmt.Sprintf("%s@%d: metadata %s: %v", key, e.Version, e.After, err))
				continue
			}
			var value string
			if e.Element != nil {
				value = string(e.Element.Value)
			}
			switch e.Op {
			case events.OpLPush:
				fold = append([]string{value}, fold...)
			case events.OpRPush:
				fold = append(fold, value)
			case events.OpLPop, events.OpRPop:
				i := 0
				if e.Op == events.OpRPop {
					i = len(fold) - 1
				}
				if len(fold) == 0 || fold[i] != value {
					f.folds = append(f.folds, fmt.Sprintf("%s@%d: %s popped %s, the fold holds %q", key, e.Version, e.Op, value, fold))
					continue
				}
				fold = slices.Delete(fold, i, i+1)
			case events.OpLTrim:
				fold = fold[:min(len(fold), int(meta.Size))]
			}
			if meta.Size != int64(len(fold)) {
				f.folds = append(f.folds, fmt.Sprintf("%s@%d: metadata %s, but the fold holds %d values", key, e.Version, e.After, len(fold)))
			}
		}
		folds[key] = fold
	}
	for _, a := range acked {
		e, ok := inLog[at{a.key, a.version}]
		if !ok || e.Op != a.op || e.Element == nil || (a.value != "" && string(e.Element.Value) != a.value) {
			f.missing = append(f.missing, fmt.Sprintf("acknowledged %s of %s in %s at version %d: the log has %s %+v there", a.op, a.value, a.key, a.version, e.Op, e.Element))
		}
	}
	if !projected {
		return f, nil
	}
	for _, key := range s.keys {
		var raw []byte
		got := []string{}
		err := db.QueryRow(ctx, `SELECT value FROM kv_entries WHERE key = $1 AND live`, key).Scan(&raw)
		if err == nil {
			meta, merr := events.ParseCollectionMeta(raw)
			if merr != nil {
				return f, merr
			}
			rows, qerr := db.Query(ctx, `SELECT value FROM kv_elements WHERE collection = $1 AND member BETWEEN $2 AND $3 ORDER BY member`,
				key, events.ListPosition(meta.Head), events.ListPosition(meta.Head+meta.Size-1))
			if qerr != nil {
				return f, fmt.Errorf("values of %s: %w", key, qerr)
			}
			for rows.Next() {
				var v string
				if err := rows.Scan(&v); err != nil {
					rows.Close()
					return f, err
				}
				got = append(got, v)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return f, err
			}
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

// print prints the list workload's line and its violations.
func (f *listFindings) print(w io.Writer) {
	n, by := countBy(f.outcomes)
	v := f.violations()
	fmt.Fprintf(w, "lists: %d violations (%d requests: %s; %d events in the log; %d acknowledged writes not in it, %d folds off, %d lists differing in the projection)\n",
		len(v), n, by, f.events, len(f.missing), len(f.folds), len(f.projected))
	printFirst(w, v)
}
