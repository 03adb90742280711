package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/elemkey"
)

// Figure 15: queues (docs/collections.md "Queues"). 15a push and 15b pop
// from one client (latency); 15c pop + ack with a visibility timeout and
// 15d plain pop from queueConsumers consumers of one queue (throughput);
// 15e and 15f a pop from one client on a queue of 1,000 items and on one
// of 1,000,000, loaded straight into the projection (sizeFigure): a pop
// is the first row of a partial index, so its latency should not depend
// on the queue's length.
const (
	targetQueueP50   = 5 * time.Millisecond // a write acknowledged after its Kafka commit, as a CAS (figure 1)
	queueConsumers   = 16
	queueSmall       = 1000
	queueLarge       = 1000000
	queueVisibility  = 30 * time.Second
	queueRunItems    = 400000 // loaded for each consumer run: more than its pops
	queueMemberStart = "0000000000000001.8000000000000000."
)

// queues is figure 15.
func (b *bench) queues(ctx context.Context, rep *report) error {
	c := client.New(b.s.writerURL, b.s.token, client.WithHTTPClient(b.hc))
	push, pop := b.queueLatency(ctx, c)
	rep.add(push)
	rep.add(pop)
	for _, visibility := range []time.Duration{queueVisibility, 0} {
		if err := ctx.Err(); err != nil {
			return err
		}
		rep.add(b.queueConsumers(ctx, c, visibility))
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	rep.Results = append(rep.Results, b.queueSizes(ctx, c)...)
	return ctx.Err()
}

// queueLatency is 15a, b.c.n pushes onto one queue from one client, and
// 15b, as many pops (removing at once) of the items pushed.
func (b *bench) queueLatency(ctx context.Context, c *client.Client) (push, pop result) {
	q := b.key("queues-"+b.runID, "latency")
	b.logf("15 queue push, 1 client x %d", b.c.n)
	i := 0
	lat, errs, elapsed := timed(ctx, b.c.n, true, func() (int, error) {
		i++
		_, err := c.QPush(ctx, client.QPushRequest{Key: q, Data: json.RawMessage(fmt.Sprintf(`{"task":%d}`, i))})
		return queueStatus(err)
	})
	push = newResult("15a", "queue push, 1 client", summarize(lat), errs, elapsed)
	push.target(targetP50, targetQueueP50)
	push.Note = "POST /v1/kv/{queue}:qpush of a small JSON item, priority 0"
	b.logf("15 queue pop, 1 client x %d", b.c.n)
	var wrong int
	lat, errs, elapsed = timed(ctx, b.c.n, true, func() (int, error) {
		a, err := c.QPop(ctx, client.QPopRequest{Key: q})
		if err == nil && len(a.Data) == 0 {
			wrong++
		}
		return queueStatus(err)
	})
	pop = newResult("15b", "queue pop (removed at once), 1 client", summarize(lat), errs, elapsed)
	pop.target(targetP50, targetQueueP50)
	pop.Note = "POST /v1/kv/{queue}:qpop of the items 15a pushed, in push order (the writer's overlay and Postgres)"
	if wrong > 0 {
		pop.Verdict, pop.Note = verdictMiss, fmt.Sprintf("%d answers had no data; %s", wrong, pop.Note)
	}
	return push, pop
}

// queueConsumers is 15c (visibility > 0: each consumer pops with it and
// acknowledges the receipt) or 15d (plain pops): queueConsumers closed
// loops on one queue of queueRunItems items loaded straight into the
// projection, for -duration.
func (b *bench) queueConsumers(ctx context.Context, c *client.Client, visibility time.Duration) result {
	step, title := "15d", fmt.Sprintf("queue pop, %d consumers on one queue", queueConsumers)
	if visibility > 0 {
		step, title = "15c", fmt.Sprintf("queue pop + ack (visibility %s), %d consumers on one queue", visibility, queueConsumers)
	}
	if !b.s.own || b.s.db == nil {
		return result{Step: step, Title: title, Verdict: verdictSkip, Note: "only on the bench's own stack: it loads the queue straight into the projection"}
	}
	q := b.key("queues-"+b.runID, "consumers-"+step)
	b.logf("%s loading a queue of %d items straight into the projection", step, queueRunItems)
	if err := b.loadQueue(ctx, q, queueRunItems); err != nil {
		return result{Step: step, Title: title, Verdict: verdictSkip, Note: "loading the queue: " + err.Error()}
	}
	b.logf("%s %s, %s", step, title, b.c.duration)
	calls := make([]func() (int, error), queueConsumers)
	for i := range calls {
		calls[i] = func() (int, error) {
			a, err := c.QPop(ctx, client.QPopRequest{Key: q, Visibility: visibility})
			if err != nil || visibility == 0 {
				return queueStatus(err)
			}
			_, err = c.QAck(ctx, q, a.Receipt)
			return queueStatus(err)
		}
	}
	lats, errs, elapsed := loops(ctx, time.Now().Add(b.c.duration), calls)
	r := newResult(step, title, summarize(lats...), errs, elapsed)
	r.Note = fmt.Sprintf("%.0f pops/s on one key (one writer partition); the queue of %s items was loaded straight into the projection",
		r.OpsPerSec, thousands(queueRunItems))
	if visibility > 0 {
		r.Note = fmt.Sprintf("each op is a pop with visibilityTimeoutSeconds %d then the ack of its receipt (two writes); ", int(visibility/time.Second)) + r.Note
	}
	return r
}

// queueSizes is 15e and 15f (sizeFigure): pops (removing at once) from
// one client. The small queue would run dry after 1,000 pops, so each
// step makes queueSmall/2 pops: the small queue ends half full.
func (b *bench) queueSizes(ctx context.Context, c *client.Client) []result {
	return b.sizeFigure(ctx, sizeFigure{
		steps: [2]string{"15e", "15f"}, sizes: [2]int{queueSmall, queueLarge}, ops: queueSmall / 2,
		kind: "queue", noun: "items", target: targetQueueP50,
		route: "POST /v1/kv/{queue}:qpop",
		title: func(n int) string {
			return fmt.Sprintf("queue pop on a queue of %s items, 1 client", thousands(n))
		},
		load: b.loadQueue,
		probe: func(ctx context.Context, q string, _ int, _ *bytes.Buffer) (int, bool, error) {
			a, err := c.QPop(ctx, client.QPopRequest{Key: q})
			status, err := queueStatus(err)
			return status, len(a.Data) > 0 && a.Deliveries == 1, err
		},
	})
}

// loadQueue writes a queue of n ready items into the projection
// (loadCollection): item i is {"i":i}, priority 0, pushed at version i+1
// of the queue incarnation 1 (member elemkey.QueueMember(1, 0, i+1), which
// queueMemberStart spells in SQL). The bench only pops these queues: a
// push would take the next version of the queue's entry (2), whose member
// a loaded item already has.
func (b *bench) loadQueue(ctx context.Context, q string, n int) error {
	now := time.Now().UTC()
	return b.loadCollection(ctx, q, contract.PurposeQueue, contract.OpQPush,
		&contract.Element{Op: contract.ElementAdd, Member: elemkey.QueueMember(1, 0, 1), Value: json.RawMessage(`{"i":0}`),
			State: decide.ItemReady, PushedAt: &now},
		`INSERT INTO kv_elements (collection, member, version, value, state, deliveries, pushed_at)
		SELECT $1, '`+queueMemberStart+`' || lpad(to_hex(i + 1), 16, '0'), 1, '{"i":' || i || '}', 'ready', 0, now()
		FROM generate_series(1, $2 - 1) AS i`, n)
}

// queueStatus maps a queue call's error to the status the bench counts
// (200 when there is none; 404 for an empty queue).
func queueStatus(err error) (int, error) {
	switch {
	case err == nil:
		return http.StatusOK, nil
	case contract.ErrorCode(err) == contract.EQueueEmpty:
		return http.StatusNotFound, err
	}
	return statusOf(err), err
}
