package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// queueRedeliver: an item popped with a 1 s visibility and not acked is
// delivered again; the first receipt is stale, the second acks it.
func queueRedeliver(ctx context.Context, r *runner) error {
	q := r.key("q")
	if _, err := r.c.QPush(ctx, client.QPushRequest{Key: q, Data: json.RawMessage(`{"task":1}`)}); err != nil {
		return fmt.Errorf("qpush: %w", err)
	}
	check("qpush {\"task\":1} to %s", q)
	first, err := r.c.QPop(ctx, client.QPopRequest{Key: q, Visibility: time.Second})
	if err != nil {
		return fmt.Errorf("qpop: %w", err)
	}
	if first.Deliveries != 1 || !sameJSON(first.Data, json.RawMessage(`{"task":1}`)) {
		return failf("first qpop: %s, deliveries %d, want the item at delivery 1", first.Data, first.Deliveries)
	}
	check("qpop with visibility 1 s: receipt r1, deliveries 1")
	second, took, err := r.popAgain(ctx, q)
	if err != nil {
		return err
	}
	if second.Deliveries != 2 || second.Receipt == first.Receipt {
		return failf("second delivery: deliveries %d, receipt changed %v", second.Deliveries, second.Receipt != first.Receipt)
	}
	check("delivered again after %s: receipt r2, deliveries 2", took.Round(time.Millisecond))
	_, err = r.c.QAck(ctx, q, first.Receipt)
	if _, ok := typed(err, contract.EStaleReceipt); !ok {
		return failf("qack r1: %v, want the typed stale_receipt", err)
	}
	check("qack r1 is the typed stale_receipt")
	ack, err := r.c.QAck(ctx, q, second.Receipt)
	if err != nil || !ack.Acked {
		return failf("qack r2: %+v, %v", ack, err)
	}
	check("qack r2 acked")
	size, err := r.c.QSize(ctx, q)
	if err != nil || size.Size != 0 {
		return failf("qsize: %+v, %v; want 0", size, err)
	}
	check("qsize is 0")
	return nil
}

// popAgain pops q until it answers (queue_empty until the sweeper
// returns the item), for at most 5 s.
func (r *runner) popAgain(ctx context.Context, q string) (client.QueuePop, time.Duration, error) {
	start := time.Now()
	for {
		p, err := r.c.QPop(ctx, client.QPopRequest{Key: q, Visibility: time.Second})
		if err == nil {
			return p, time.Since(start), nil
		}
		if _, ok := typed(err, contract.EQueueEmpty); !ok {
			return p, 0, fmt.Errorf("qpop again: %w", err)
		}
		if time.Since(start) > 5*time.Second {
			return p, 0, failf("no second delivery within 5 s")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// txnRefusal: a transaction whose third op's condition fails is refused
// with the typed error naming ops[2]; nothing of it is applied.
func txnRefusal(ctx context.Context, r *runner) error {
	a, b, c := r.key("a"), r.key("b"), r.key("c")
	put, err := r.c.Put(ctx, client.PutRequest{Key: a, Value: json.RawMessage(`{"a":1}`)})
	if err != nil {
		return fmt.Errorf("put a: %w", err)
	}
	check("put a at version %d", put.Entry.Version)
	wrong, one := put.Entry.Version+1, int64(1)
	_, err = r.c.Txn(ctx, contract.TxnBody{Ops: []contract.TxnOp{
		{Op: contract.OpPut, Key: b, Value: json.RawMessage(`{"b":1}`)},
		{Op: contract.OpIncrement, Key: c, By: &one, Create: true},
		{Op: contract.OpPut, Key: a, Value: json.RawMessage(`{"a":2}`), Condition: &contract.Condition{Version: &wrong}},
	}})
	var e *contract.Error
	if !errors.As(err, &e) || e.FailedOp == nil || *e.FailedOp != 2 || !strings.HasPrefix(e.Field, "ops[2]") {
		return failf("the transaction: %v, want the typed error naming op 2 (FailedOp 2, field ops[2]...)", err)
	}
	check("the transaction is refused: typed %s, FailedOp %d, field %q", e.Code, *e.FailedOp, e.Field)
	for _, k := range []string{b, c} {
		if _, err := r.c.Get(ctx, k); err == nil {
			return failf("%s exists after the refused transaction", k)
		} else if _, ok := typed(err, contract.ENotFound); !ok {
			return fmt.Errorf("get %s: %w", k, err)
		}
	}
	check("b and c are not found: nothing was applied")
	return nil
}
