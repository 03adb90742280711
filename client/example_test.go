package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// These examples need a running server (make run in eskv's repository), so
// they are compiled but not run; the package clienttest of eskv's module
// runs the same calls against an in-process one (TestClient,
// TestKeepLockStack, TestUpdateConcurrent).

// A program's first calls: one Client, shared; a write that is safe to
// retry (it carries a RequestID); a read that tells absent from failed.
func Example() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	_, err := c.Put(ctx, client.PutRequest{
		Key:       "tenant/acme/project/demo/greeting",
		Value:     json.RawMessage(`"hello"`),
		RequestID: "greeting-1", // a retry is answered as a replay
	})
	if err != nil {
		log.Fatal(err)
	}
	e, err := c.Get(ctx, "tenant/acme/project/demo/greeting")
	switch {
	case contract.ErrorCode(err) == contract.ENotFound:
		fmt.Println("absent, expired or deleted")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%s at version %d\n", e.Value, e.Version)
	}
}

func ExampleClient_Put() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx := context.Background()
	res, err := c.Put(ctx, client.PutRequest{
		Key:             "tenant/acme/project/demo/checkpoint",
		Value:           json.RawMessage(`{"cursor":42}`),
		ExpectedVersion: new(int64), // 0: create only if absent
		Semantics:       contract.Semantics{Purpose: "checkpoint", Producer: "example"},
		RequestID:       "example-1", // safe to retry
	})
	var e *contract.Error
	switch {
	case errors.As(err, &e) && e.Code == contract.EConflict && e.Current != nil:
		fmt.Println("already at version", e.Current.Version)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("created at version", res.Entry.Version)
	}
}

func ExampleClient_Get() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	e, err := c.Get(context.Background(), "tenant/acme/project/demo/checkpoint")
	if contract.ErrorCode(err) == contract.ENotFound {
		fmt.Println("no checkpoint yet")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("version %d: %s\n", e.Version, e.Value)
}

// A rate limit: each request takes one unit of a quota, refused once the
// counter would go below 0. The server decides it in one request, so
// concurrent callers never overdraw the quota.
func ExampleClient_Increment_rateLimit() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	_, err := c.Increment(context.Background(), client.IncrementRequest{
		Key: "tenant/acme/project/demo/rate-limit/user-42",
		By:  -1,
		Min: new(int64), // 0
	})
	var e *contract.Error
	switch {
	case errors.As(err, &e) && e.Code == contract.EOutOfRange && e.Field == "min":
		fmt.Println("rate limit exceeded")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("allowed")
	}
}

func ExampleClient_ListAll() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	for e, err := range c.ListAll(context.Background(), client.ListOptions{Prefix: "tenant/acme/project/demo/", Limit: 500}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(e.Key, e.Version)
	}
}

// A cache of a prefix kept in step with the server: the snapshot
// replaces it, each event after it updates it; a relist (the log no
// longer held what followed) rebuilds it. (Compiled, not run: it needs
// a running server.)
func ExampleClient_ListWatch() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	cache := map[string]json.RawMessage{}
	for ch, err := range c.ListWatch(context.Background(), client.ListWatchOptions{Prefix: "tenant/acme/project/demo/flags/"}) {
		if err != nil { // 400, 403: nothing to wait for
			log.Fatal(err)
		}
		switch ch.Type {
		case client.ChangeSnapshot: // first, and again after a relist (ch.Relist)
			clear(cache)
			for _, e := range ch.Snapshot {
				cache[e.Key] = e.Value
			}
		case client.ChangeEvent:
			if ch.Event.Kind == contract.KindPut {
				cache[ch.Event.Key] = ch.Event.Value
			} else { // delete, expire
				delete(cache, ch.Event.Key)
			}
		}
		fmt.Println(len(cache), "flags as of", ch.Position)
	}
}

// A nightly job that runs only while it holds its lock: the lease is
// renewed in the background, and the job's context ends if it is lost.
// (Compiled, not run: it needs a running server.)
func ExampleClient_KeepLock() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx := context.Background()
	host, _ := os.Hostname()
	lease, err := c.KeepLock(ctx, client.LockRequest{
		Key:    "tenant/acme/project/demo/locks/nightly",
		Holder: fmt.Sprintf("%s/%d", host, os.Getpid()),
		TTL:    30 * time.Second, // renewed every 10 s
	})
	if contract.ErrorCode(err) == contract.ELockHeld {
		fmt.Println("another run holds it")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.WithoutCancel(ctx))

	// Hand the fencing token to what the lock protects, and stop when
	// the lease's context ends.
	err = nightly(lease.Context(), lease.Token())
	switch {
	case errors.Is(lease.Err(), client.ErrLeaseLost):
		fmt.Println("lost the lock while the job ran:", lease.Err())
	case err != nil:
		fmt.Println("the job failed:", err)
	}
}

func nightly(ctx context.Context, token int64) error {
	fmt.Println("working with fencing token", token)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Minute):
		return nil
	}
}

// A sweeper: jobs not updated for five minutes, found by an index on
// updated_at (RFC 3339 in UTC, so strings compare as instants); the state
// is checked on the few entries returned.
func ExampleClient_ScanAll() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	cutoff := time.Now().UTC().Add(-5 * time.Minute).Format(time.RFC3339)
	stale := client.ScanOptions{
		Prefix: "tenant/acme/project/demo/jobs/",
		Filter: client.Filter{Field: "updated_at", Op: contract.FilterLt, Value: cutoff},
		Limit:  100,
	}
	for e, err := range c.ScanAll(context.Background(), stale) {
		if err != nil {
			log.Fatal(err)
		}
		var job struct {
			State string `json:"state"`
		}
		if json.Unmarshal(e.Value, &job) == nil && job.State != "done" && job.State != "failed" {
			fmt.Println("stuck:", e.Key, job.State)
		}
	}
}

// Moving 10 from one account to another of the same project, atomically:
// both increments apply or neither does. The condition on the first makes
// it a compare-and-swap of what the caller read; a retry with the same
// RequestID is answered as a replay.
func ExampleClient_Txn() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	by := func(n int64) *int64 { return &n }
	seen := int64(7) // the version of accounts/a the caller read
	ans, err := c.Txn(context.Background(), contract.TxnBody{RequestID: "transfer-0042", Ops: []contract.TxnOp{
		{Op: contract.OpIncrement, Key: "tenant/acme/project/bank/accounts/a", By: by(-10), Condition: &contract.Condition{Version: &seen}},
		{Op: contract.OpIncrement, Key: "tenant/acme/project/bank/accounts/b", By: by(10)},
	}})
	var e *contract.Error
	switch {
	case errors.As(err, &e) && e.FailedOp != nil:
		fmt.Printf("op %d failed (%s); nothing was applied\n", *e.FailedOp, e.Code)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println("transaction", ans.TxnID, "a is now", string(ans.Results[0].Value))
	}
}

// A harvester advances its checkpoint with a read-modify-write: Update
// reads the checkpoint, computes the next one and compare-and-swaps it; if
// another harvester got there first it reads again after 1 s, 2 s, 4 s …
// 32 s, then escalates. The RequestID names this sync, so running it again
// after a crash does not advance the checkpoint twice. (Compiled, not run;
// clienttest's TestUpdateConcurrent runs Update against an in-process server.)
func ExampleClient_Update() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	type checkpoint struct {
		Cursor int `json:"cursor"`
	}
	res, err := c.Update(context.Background(), "tenant/acme/project/demo/checkpoint",
		func(current *contract.Entry) (json.RawMessage, error) {
			var cp checkpoint // the zero checkpoint when the key is absent
			if current != nil {
				if err := json.Unmarshal(current.Value, &cp); err != nil {
					return nil, err // ends Update; nothing is written
				}
			}
			cp.Cursor += 100
			return json.Marshal(cp)
		},
		client.UpdateOptions{Semantics: contract.Semantics{Purpose: "checkpoint", Producer: "harvester"}, RequestID: "sync-2026-11-24T00:00Z"})
	var esc *client.EscalationError
	switch {
	case errors.As(err, &esc):
		// The seed's escalation: page a human with the attempts and the
		// last error (a conflict, or a transient error retried 5 times).
		log.Fatalf("checkpoint needs triage after %d attempts: %v", esc.Attempts, esc.Err)
	case err != nil:
		log.Fatal(err) // fatal: invalid, forbidden, ...
	}
	fmt.Printf("checkpoint at version %d after %d attempt(s): %s\n", res.Entry.Version, res.Attempts, res.Entry.Value)
}

// An update that escalates is handed to a dead-letter queue instead of
// paging a human at once: one item with the key, the last write's
// requestId, the attempts and the last error (no value, unless
// DeadLetterValue). A service account names its directive, so the logs
// and the audit trail tell whose task it was.
func ExampleClient_Update_deadLetter() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"), client.WithDirective("onedrive-delta-sync"))
	const queue = "tenant/acme/project/demo/triage/checkpoints"
	_, err := c.Update(context.Background(), "tenant/acme/project/demo/checkpoint",
		func(current *contract.Entry) (json.RawMessage, error) { return json.RawMessage(`{"cursor":200}`), nil },
		client.UpdateOptions{RequestID: "sync-2026-11-24T00:00Z", DeadLetter: queue})
	var esc *client.EscalationError
	if errors.As(err, &esc) && esc.DeadLetter != "" {
		fmt.Printf("handed to %s after %d attempts\n", esc.DeadLetter, esc.Attempts)
	} else if err != nil {
		log.Fatal(err) // fatal, or the push to the queue failed too
	}
}

// A triage worker pops the dead-letter queue: each item says which key
// to look at, which requestId its last write carried and why the update
// gave up. It takes an item with a visibility timeout and acknowledges it
// once handled, so an item whose worker dies is delivered again.
func Example_triageWorker() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx := context.Background()
	const queue = "tenant/acme/project/demo/triage/checkpoints"
	for {
		p, err := c.QPop(ctx, client.QPopRequest{Key: queue, Visibility: time.Minute})
		if errors.Is(err, client.ErrQueueEmpty) {
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		var d client.DeadLetter
		if err := json.Unmarshal(p.Data, &d); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %d attempts, last %s (%s), requestId %s, directive %q\n",
			d.Key, d.Attempts, d.LastError.Code, d.LastError.Message, d.RequestID, d.Directive)
		if _, err := c.QAck(ctx, queue, p.Receipt); err != nil {
			log.Fatal(err)
		}
	}
}

// A cache that follows a project's flags: list them, every page (one
// snapshot: each page answers the first page's Position), then watch
// after the listing's position, which delivers exactly the changes after
// it. A consumer that restarts keeps the last cursor it processed and
// passes it as After; Watch itself reconnects after its last cursor.
func ExampleClient_Watch() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := "tenant/acme/project/demo/flags/"
	cache := map[string]json.RawMessage{}
	o := client.ListOptions{Prefix: prefix}
	var position string
	for {
		page, err := c.List(ctx, o)
		if err != nil {
			log.Fatal(err) // snapshot_expired: list again from the first page
		}
		for _, e := range page.Items {
			cache[e.Key] = e.Value
		}
		position = page.Position
		if !page.Truncated {
			break
		}
		o.Cursor = page.NextCursor
	}
	for ev, err := range c.Watch(ctx, client.WatchOptions{Prefix: prefix, After: position}) {
		if contract.ErrorCode(err) == contract.ECursorExpired {
			fmt.Println("the log moved on: list the flags again, then watch after the new listing's position")
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		if ev.Kind == contract.KindPut {
			cache[ev.Key] = ev.Value
		} else {
			delete(cache, ev.Key)
		}
		fmt.Printf("%s is at version %d (%s); resume after %s\n", ev.Key, ev.Version, ev.Kind, ev.Cursor)
	}
}

// A client that tries transient failures 3 times in all, waits 200 ms,
// 400 ms … at most 5 s between tries, and logs each retry.
func ExampleWithRetryPolicy() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"),
		client.WithRetryPolicy(client.RetryPolicy{
			Attempts: 3,
			MinWait:  200 * time.Millisecond,
			MaxWait:  5 * time.Second,
			OnRetry: func(err error, attempt int, wait time.Duration) {
				log.Printf("attempt %d: %v (%s); again in %v", attempt, err, client.Classify(err), wait)
			},
		}))
	_, err := c.Get(context.Background(), "tenant/acme/project/demo/checkpoint")
	var esc *client.EscalationError
	if errors.As(err, &esc) {
		log.Printf("gave up after %d attempts: %v", esc.Attempts, esc.Err)
	}
}
