package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection/elemkey"
)

// The queue workload: -queue-clients clients push unique items onto a few
// queues, pop them with a short visibility timeout and acknowledge most
// (a quarter deliberately not, so they come back after their deadline),
// and pop some without one (half of those blocking: ?wait=, answered as
// soon as an item arrives), each write with a requestId of its own,
// through random writers, under the faults. Once the clients stop (the
// stack has healed), one client drains the queues. The checks, against
// the log: every write answered 200 is its event (the same item, data
// and delivery); no item is acknowledged twice and no delivery answered
// to two pops; each item's events follow its states (a pop takes a ready
// item, an ack an item in flight, a requeue an item in flight whose
// deadline passed: so no item is delivered to two consumers while its
// visibility holds), with deliveries counted one by one; the metadata's
// size and inFlight count the fold at every event; every pushed item is
// delivered at least once; the final size is pushed - acked - popped
// without visibility (and 0 after the drain); and, once the projection
// holds the whole log, its ready and in-flight rows are the fold's.
// blockingWait is the query of the workloads' blocking pops and acquires
// (docs/collections.md "Blocking waits"): well within -op-timeout.
const blockingWait = "?wait=1s"

const (
	queueCount      = 2
	queueVisibility = 2 // seconds: short, so unacknowledged items come back during the run
	queueDrainFor   = 90 * time.Second
)

// queueKeys are the queues of the workload, in a project of their own.
func queueKeys() []string { return workloadKeys("queues", "queue", queueCount) }

// queueChange is an acknowledged queue write, as its answer says: its
// queue, version, op, item, data (pushed or popped) and delivery (a pop's
// deliveries, an ack's receipt's; 0 for a pop without visibility).
type queueChange struct {
	key      string
	version  int64
	op       contract.Op
	item     string
	data     string
	delivery int64
}

// queueWorkload runs the queue clients and records what they were
// answered: outcomes pushed, delivered (a pop with visibility), removed
// (without), empty, acked, stale (an ack of a stale receipt), failed,
// unknown; and what the drain left.
type queueWorkload struct {
	collectionWorkload[queueChange]
	left map[string]int64 // the size each queue answered after the drain
}

func newQueueWorkload(c *clients) *queueWorkload {
	return &queueWorkload{collectionWorkload: newCollectionWorkload[queueChange](c, queueKeys(), 4000), left: map[string]int64{}}
}

// run starts n clients and returns once stop is closed, each finished its
// current operation, and the queues were drained.
func (q *queueWorkload) run(n int, seed uint64, stop <-chan struct{}) {
	if n == 0 {
		return
	}
	q.collectionWorkload.run(n, seed, stop, func(id, seq int, rng *rand.Rand, key, base string) string {
		rid := fmt.Sprintf("chaos-queue-c%d-%d", id, seq)
		switch r := rng.IntN(10); {
		case r < 4:
			return q.push(base, key, fmt.Sprintf(`"c%d-%d"`, id, seq), rid)
		case r < 8:
			outcome, receipt := q.pop(base, key, queueVisibility, false, rid)
			if receipt == "" || rng.IntN(4) == 0 { // not acknowledged: it comes back
				return outcome
			}
			return q.ack(base, key, receipt, rid+"-ack")
		default:
			outcome, _ := q.pop(base, key, 0, rng.IntN(2) == 0, rid)
			return outcome
		}
	})
	q.drain()
}

// push pushes data (a unique JSON string) onto the queue key.
func (q *queueWorkload) push(base, key, data, rid string) string {
	var ans contract.QPushAnswer
	outcome, _ := q.post(base+":qpush", contract.QPushBody{Data: json.RawMessage(data), RequestID: rid}, &ans)
	if outcome != "ok" {
		q.record(outcome)
		return outcome
	}
	q.record("pushed", queueChange{key: key, version: ans.Version, op: contract.OpQPush, item: ans.Item, data: data})
	return "pushed"
}

// pop pops the next item of the queue key, with a visibility timeout of
// visibility seconds (0: removed at once), waiting for one (blockingWait)
// when wait is set, and returns the receipt of a delivery.
func (q *queueWorkload) pop(base, key string, visibility int64, wait bool, rid string) (outcome, receipt string) {
	var ans contract.QPopAnswer
	url := base + ":qpop"
	if wait {
		url += blockingWait
	}
	outcome, _ = q.post(url, contract.QPopBody{VisibilityTimeoutSeconds: visibility, RequestID: rid}, &ans)
	if outcome != "ok" {
		q.record(outcome)
		return outcome, ""
	}
	c := queueChange{key: key, version: ans.Version, op: contract.OpQPop, item: ans.Item, data: string(ans.Data)}
	outcome = "removed"
	if visibility > 0 {
		outcome, receipt, c.delivery = "delivered", ans.Receipt, ans.Deliveries
	}
	if wait {
		outcome += " after a wait"
	}
	q.record(outcome, c)
	return outcome, receipt
}

// ack acknowledges the delivery receipt names.
func (q *queueWorkload) ack(base, key, receipt, rid string) string {
	var ans contract.QAckAnswer
	outcome, a := q.post(base+":qack", contract.QAckBody{Receipt: receipt, RequestID: rid}, &ans)
	if outcome == "unknown" && a.err == nil && a.status == http.StatusConflict && strings.Contains(string(a.body), contract.EStaleReceipt) {
		outcome = "stale" // its deadline passed and the sweeper requeued it first
	}
	if outcome != "ok" {
		q.record(outcome)
		return outcome
	}
	item, delivery, _, _ := contract.ParseReceipt(receipt)
	q.record("acked", queueChange{key: key, version: ans.Version, op: contract.OpQAck, item: item, delivery: delivery})
	return "acked"
}

// drain pops every queue without visibility until it is empty with
// nothing in flight (in-flight items come back once the sweeper requeues
// them), within queueDrainFor; left keeps each queue's last size.
func (q *queueWorkload) drain() {
	deadline := time.Now().Add(queueDrainFor)
	for i, key := range q.keys {
		base := q.c.urls[i%len(q.c.urls)] + "/v1/kv/" + key
		for seq := 0; time.Now().Before(deadline); seq++ {
			if outcome, _ := q.pop(base, key, 0, false, fmt.Sprintf("chaos-queue-drain-%d-%d", i, seq)); outcome != "empty" {
				continue
			}
			var size contract.QSizeAnswer
			a := q.c.do(http.MethodGet, base+":qsize", nil)
			if a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &size) == nil {
				q.mu.Lock()
				q.left[key] = size.Size
				q.mu.Unlock()
				if size.Size == 0 {
					break
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// queueItem is an item's state in the fold of the log.
type queueItem struct {
	state      string // decide.ItemReady, ItemInFlight, or "gone"
	deliveries int64
	deadline   time.Time
	pops       int
}

// queueFold is the fold of one queue's events.
type queueFold struct {
	items                            map[string]*queueItem
	since                            int64
	size, inFlight                   int64 // the fold's
	pushed, acked, removed, requeued int64
	lastSize                         int64 // the last event's metadata
	events                           int
	violations                       []string
	order                            []string // items in push order
}

// queueFindings are the queue workload's results and checks.
type queueFindings struct {
	collectionFindings
	pushed, acked, removed, requeued int64
	// missing: an acknowledged write that is not its event in the log;
	// twice: an item acknowledged twice, or a delivery answered to two
	// pops; folds: an event that does not follow the item's state or
	// whose metadata is not the fold's; undelivered: a pushed item never
	// popped; sizes: a final size that is not pushed - acked - removed, or
	// a queue the drain left non-empty; projected: a queue whose rows in
	// the projection are not the fold's.
	missing, twice, folds, undelivered, sizes, projected []string
}

func (f *queueFindings) violations() []string {
	return slices.Concat(f.missing, f.twice, f.folds, f.undelivered, f.sizes, f.projected)
}

// check folds the queues' events of the log and checks them, the
// acknowledged writes and, when projected is set, the projection's rows.
func (q *queueWorkload) check(ctx context.Context, evs []logcheck.Event, db *pgxpool.Pool, projected bool) (queueFindings, error) {
	var f queueFindings
	outcomes, acked := q.snapshot()
	f.outcomes = outcomes
	inLog := map[keyVersion]contract.Event{}
	folds := map[string]*queueFold{}
	for key, es := range eventsOf(evs, q.keys) {
		for _, e := range es {
			inLog[keyVersion{key, e.Version}] = e
		}
		fold := foldQueue(key, es)
		folds[key] = fold
		f.add(key, fold)
	}
	f.checkAcked(acked, inLog)
	q.mu.Lock()
	for _, key := range q.keys {
		if left := q.left[key]; left != 0 {
			f.sizes = append(f.sizes, fmt.Sprintf("%s: the drain left %d items", key, left))
		}
	}
	q.mu.Unlock()
	if !projected {
		return f, nil
	}
	for key, fold := range folds {
		if err := f.checkProjected(ctx, db, key, fold); err != nil {
			return f, err
		}
	}
	return f, nil
}

// add adds the fold of the queue key to f.
func (f *queueFindings) add(key string, fold *queueFold) {
	f.events += fold.events
	f.pushed, f.acked, f.removed, f.requeued = f.pushed+fold.pushed, f.acked+fold.acked, f.removed+fold.removed, f.requeued+fold.requeued
	f.folds = append(f.folds, fold.violations...)
	for _, m := range fold.order {
		if fold.items[m].pops == 0 {
			f.undelivered = append(f.undelivered, fmt.Sprintf("%s: item %s was pushed and never delivered", key, m))
		}
	}
	if want := fold.pushed - fold.acked - fold.removed; fold.lastSize != want {
		f.sizes = append(f.sizes, fmt.Sprintf("%s: final size %d, but %d pushed - %d acked - %d popped without visibility = %d",
			key, fold.lastSize, fold.pushed, fold.acked, fold.removed, want))
	}
}

// foldQueue applies the events of the queue key in version order to its
// items' states and notes every event that does not follow them.
func foldQueue(key string, es []contract.Event) *queueFold {
	fold := &queueFold{items: map[string]*queueItem{}, events: len(es)}
	for _, e := range es {
		meta, err := contract.ParseCollectionMeta(e.After)
		if err != nil || e.Element == nil {
			fold.violations = append(fold.violations, fmt.Sprintf("%s@%d (%s): metadata %s, element %+v", key, e.Version, e.Op, e.After, e.Element))
			continue
		}
		fold.since = meta.Since
		if msg := fold.apply(e); msg != "" {
			fold.violations = append(fold.violations, fmt.Sprintf("%s@%d: %s %s", key, e.Version, e.Op, msg))
		}
		fold.lastSize = meta.Size
		if meta.Size != fold.size || meta.InFlight != fold.inFlight {
			fold.violations = append(fold.violations, fmt.Sprintf("%s@%d: metadata %s, but the fold holds %d items, %d in flight",
				key, e.Version, e.After, fold.size, fold.inFlight))
		}
	}
	return fold
}

// apply applies one event to the fold and says what is wrong with it
// ("" when nothing).
func (fold *queueFold) apply(e contract.Event) string {
	el := e.Element
	it := fold.items[el.Member]
	if e.Op == contract.OpQPush {
		if it != nil {
			return "of an item pushed already: " + el.Member
		}
		fold.items[el.Member] = &queueItem{state: decide.ItemReady}
		fold.order = append(fold.order, el.Member)
		fold.pushed++
		fold.size++
		return ""
	}
	if it == nil {
		return "of an item never pushed: " + el.Member
	}
	switch e.Op {
	case contract.OpQPop:
		return fold.pop(it, el)
	case contract.OpQAck:
		if it.state != decide.ItemInFlight || el.State == decide.ItemReady || el.State == decide.ItemInFlight {
			return fmt.Sprintf("of item %s, %s, leaving it %q", el.Member, it.state, el.State)
		}
		it.state = "gone"
		fold.acked++
		fold.size--
		fold.inFlight--
	case contract.OpQRequeue:
		if it.state != decide.ItemInFlight || el.State != decide.ItemReady || el.Deliveries != it.deliveries {
			return fmt.Sprintf("of item %s, %s at delivery %d, to %q at delivery %d", el.Member, it.state, it.deliveries, el.State, el.Deliveries)
		}
		it.state = decide.ItemReady
		fold.requeued++
		fold.inFlight--
		if e.TS.Before(it.deadline) {
			return fmt.Sprintf("of item %s at %s, before its deadline %s: delivered again while its visibility held", el.Member, e.TS, it.deadline)
		}
	case contract.OpQExpire:
		// The workload pushes no item TTL: a qexpire is never due.
		return fmt.Sprintf("of item %s, which had no item TTL", el.Member)
	default:
		return "is not a queue write"
	}
	return ""
}

// pop applies a pop of it: it must be ready; a delivery counts one more.
func (fold *queueFold) pop(it *queueItem, el *contract.Element) string {
	if it.state != decide.ItemReady {
		return fmt.Sprintf("of item %s, %s: delivered while not ready", el.Member, it.state)
	}
	it.pops++
	if el.State != decide.ItemInFlight {
		it.state = "gone"
		fold.removed++
		fold.size--
		return ""
	}
	if el.VisibleAt == nil {
		return fmt.Sprintf("of item %s: in flight without a deadline", el.Member)
	}
	previous := it.deliveries
	it.state, it.deliveries, it.deadline = decide.ItemInFlight, el.Deliveries, *el.VisibleAt
	fold.inFlight++
	if el.Deliveries != previous+1 {
		return fmt.Sprintf("of item %s: delivery %d after %d", el.Member, el.Deliveries, previous)
	}
	return ""
}

// checkAcked checks the acknowledged writes against the log, and that no
// item was acknowledged twice nor a delivery answered to two pops.
func (f *queueFindings) checkAcked(acked []queueChange, inLog map[keyVersion]contract.Event) {
	type delivery struct {
		key, item string
		delivery  int64
	}
	pops, acks := map[delivery]int64{}, map[delivery]int64{}
	for _, a := range acked {
		e, ok := inLog[keyVersion{a.key, a.version}]
		switch {
		case !ok || e.Op != a.op || e.Element == nil || e.Element.Member != a.item:
			f.missing = append(f.missing, fmt.Sprintf("acknowledged %s of %s in %s at version %d: the log has %s %+v there", a.op, a.item, a.key, a.version, e.Op, e.Element))
		case a.op != contract.OpQAck && string(e.Element.Value) != a.data, a.delivery > 0 && e.Element.Deliveries != a.delivery:
			f.missing = append(f.missing, fmt.Sprintf("acknowledged %s of %s (%s, delivery %d) in %s at version %d: the log has %s delivery %d",
				a.op, a.item, a.data, a.delivery, a.key, a.version, e.Element.Value, e.Element.Deliveries))
		}
		seen, d := pops, delivery{a.key, a.item, a.delivery}
		switch {
		case a.op == contract.OpQAck:
			seen, d.delivery = acks, 0 // one ack per item, whichever delivery
		case a.op != contract.OpQPop || a.delivery == 0:
			continue
		}
		if v, dup := seen[d]; dup && v != a.version {
			f.twice = append(f.twice, fmt.Sprintf("%s: item %s %s twice (versions %d and %d)", a.key, a.item, a.op, v, a.version))
		}
		seen[d] = a.version
	}
}

// checkProjected compares the ready and in-flight rows of the queue key
// in the projection with the fold's items.
func (f *queueFindings) checkProjected(ctx context.Context, db *pgxpool.Pool, key string, fold *queueFold) error {
	from, to := elemkey.QueueRange(fold.since)
	rows, err := db.Query(ctx, `SELECT member || ' ' || state FROM kv_elements
		WHERE collection = $1 AND member >= $2 AND member < $3 AND state IN ('ready', 'inflight') ORDER BY member`, key, from, to)
	if err != nil {
		return fmt.Errorf("items of %s: %w", key, err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("items of %s: %w", key, err)
	}
	want := []string{}
	for _, m := range fold.order {
		if s := fold.items[m].state; s != "gone" {
			want = append(want, m+" "+s)
		}
	}
	slices.Sort(want)
	if got == nil {
		got = []string{}
	}
	if !slices.Equal(got, want) {
		f.projected = append(f.projected, fmt.Sprintf("%s: the projection holds %q, the log implies %q", key, first(got, 5), first(want, 5)))
	}
	return nil
}

// print prints the queue workload's line and its violations.
func (f *queueFindings) print(w io.Writer) {
	f.collectionFindings.print(w, "queues", f.violations(), fmt.Sprintf(
		"%d pushed, %d acked, %d popped without visibility, %d requeued after their deadline; "+
			"%d acknowledged writes not in it, %d twice, %d folds off, %d never delivered, %d sizes off, %d queues differing in the projection",
		f.pushed, f.acked, f.removed, f.requeued,
		len(f.missing), len(f.twice), len(f.folds), len(f.undelivered), len(f.sizes), len(f.projected)))
}
