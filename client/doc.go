// Package client is the Go client of eskv, an event-sourced multi-tenant
// key-value store: typed calls over its HTTP API (schemas/openapi.yaml in
// eskv's repository), errors as *contract.Error, and retries only where
// they are safe. kvctl, eskv's command-line client, is built on it.
//
// The client is a module of its own, github.com/eskv/eskv/client: it
// needs Go 1.24 and nothing beyond the standard library and
// github.com/eskv/eskv/contract, the vocabulary (entries, requests,
// answers, error codes) it shares with the server. Importing it brings in
// none of the server's dependencies.
//
//	go get github.com/eskv/eskv/client
//
// # Getting started
//
// A Client holds the API's base URL and one bearer token; it is safe for
// concurrent use, so a program makes one and shares it. Every call takes
// a context.Context, which bounds it, its retries included:
//
//	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
//	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//
//	_, err := c.Put(ctx, client.PutRequest{
//		Key:       "tenant/acme/project/demo/greeting",
//		Value:     json.RawMessage(`"hello"`),
//		RequestID: "greeting-1", // a retry is answered as a replay
//	})
//	if err != nil {
//		log.Fatal(err)
//	}
//	e, err := c.Get(ctx, "tenant/acme/project/demo/greeting")
//	switch {
//	case contract.ErrorCode(err) == contract.ENotFound:
//		fmt.Println("absent, expired or deleted")
//	case err != nil:
//		log.Fatal(err)
//	default:
//		fmt.Printf("%s at version %d\n", e.Value, e.Version)
//	}
//
// Keys are tenant/<t>/project/<p>/...; the token's grants say which a
// caller may read or write. Beside plain entries (Get, Put, Delete, Touch,
// Patch, GetField) the server keeps counters (Increment, Decrement),
// lists (LPush, RPop, LRange ...), sets (SAdd, SMembers ...), queues
// (QPush, QPop, QAck ...), locks and leader election (AcquireLock,
// KeepLock, Elect, KeepLeadership), transactions of several keys of one
// project (Txn) and each key's history (History). Call reaches any other
// operation of the contract, so a new one needs no change here.
//
// # Errors
//
// Every answer the server gives as an error body becomes an
// *contract.Error with its stable Code (contract.ENotFound,
// contract.EConflict, ...), Field, and for conflicts Current; switch on
// contract.ErrorCode(err). A request that got no HTTP answer at all
// (unreachable server, broken connection, ctx ended) is a *NetworkError
// instead: a write that failed so may or may not have been applied.
//
// # Retries
//
// Retries follow the semantic-KV seed's "Retry & Backoff" (RetryPolicy,
// Classify): transient errors (503 partition_unavailable or
// outcome_unknown, a proxy's 429, 502, 503 or 504, network errors and
// timeouts, a try that outlasts DefaultAttemptTimeout) are retried with
// jittered exponential waits, at least the server's Retry-After, and
// escalate as an *EscalationError after 5 attempts; fatal errors (400,
// 401, 403, 404, 413, a reused requestId, 500, ...) fail at once. Reads
// are retried; writes only when they carry a RequestID, since the server
// answers a repeated request as a replay instead of writing it twice
// (lists, sets and queues' writes get one from the client when the caller
// gives none). A wait that would outlast ctx's deadline is not started.
//
// Update is the read-modify-write loop: it reads a key, applies the
// caller's function and compare-and-swaps the result, and on a version
// conflict reads again after 1 s, 2 s, 4 s … 32 s before it escalates.
// WithRetryPolicy changes either schedule.
//
// # Iterating and watching
//
// ListAll, ScanAll, History and SMembers walk every page of an answer as
// an iter.Seq2 of items and errors, for use with range; List, Scan,
// HistoryPage and SMembersPage return one page. Watch is an iter.Seq2 of
// a prefix's or a key's changes as they happen: it reconnects after the
// last event it gave, and ends with the caller's ctx or an error.
// ListWatch keeps a cache of a prefix: it yields the prefix's snapshot
// (one listing, at its position), then every change after it, and a
// new snapshot (Relist) when the log no longer holds what followed.
//
// # Leases
//
// KeepLock and KeepLeadership take a lock or a leadership and keep
// renewing it in the background: the Lease's Context ends when it is
// lost, and its Token is the fencing token to hand to what the lock
// protects.
package client
