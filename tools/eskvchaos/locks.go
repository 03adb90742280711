package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// The lock workload: -lock-clients clients take a few fenced locks
// (:acquire with a 2 s lease, holder c<client>), write the resource each
// protects in a transaction that checks the lock's token (README, "Locks:
// fenced writes"), sometimes after stalling past the lease (a holder
// paused or partitioned while the next one takes over), and release or
// let the lease run out, through random writers under the faults; half
// the acquires wait (?wait=, granted in arrival order). The
// check, from the log alone (the lock and its resource are in one
// project, so in one partition, in one order): a lock's tokens only grow
// from tenure to tenure, and every committed resource write carries the
// token of the tenure the lock was in at that point of the log, which had
// not expired when the write was decided; no tenure begins while the one
// before is live (two live holders). A fencing token accepted after
// a newer tenure began is what a stale holder — a zombie — would get
// through.
const (
	lockCount = 2
	lockTTL   = 2 // seconds
)

// lockKeys are the locks; resourceKey the key each protects.
func lockKeys() []string             { return workloadKeys("locks", "lock", lockCount) }
func resourceKey(lock string) string { return lock + "/resource" }

// fencedWrite is what a resource write carries.
type fencedWrite struct {
	Holder string `json:"holder"`
	Token  int64  `json:"token"`
	Seq    int    `json:"seq"`
}

// lockWorkload runs the lock clients and counts their outcomes.
type lockWorkload struct {
	collectionWorkload[struct{}]
}

func newLockWorkload(c *clients) *lockWorkload {
	return &lockWorkload{newCollectionWorkload[struct{}](c, lockKeys(), 7000)}
}

// run starts n clients and returns once stop is closed.
func (l *lockWorkload) run(n int, seed uint64, stop <-chan struct{}) {
	l.collectionWorkload.run(n, seed, stop, func(id, seq int, rng *rand.Rand, key, base string) string {
		holder := fmt.Sprintf("c%d", id)
		var ans contract.LockAnswer
		ttl := int64(lockTTL)
		acquire, waited := base+":acquire", ""
		if rng.IntN(2) == 0 { // granted in arrival order once free (blockingWait)
			acquire, waited = acquire+blockingWait, " after a wait"
		}
		if outcome := l.lockOp(acquire, contract.LockBody{Holder: holder, TTLSeconds: &ttl,
			RequestID: fmt.Sprintf("chaos-lock-c%d-%d", id, seq)}, &ans); outcome != "ok" {
			l.record("acquire " + outcome + waited)
			return outcome
		}
		l.record("acquired" + waited)
		writerURL := l.c.urls[rng.IntN(len(l.c.urls))]
		for i := range 1 + rng.IntN(3) {
			if rng.IntN(6) == 0 { // a holder that stalls past its lease
				time.Sleep(lockTTL*time.Second + 500*time.Millisecond)
			}
			l.record("write " + l.fencedWrite(writerURL, key, ans.Token, holder, fmt.Sprintf("chaos-lockw-c%d-%d-%d", id, seq, i), seq))
		}
		if rng.IntN(3) > 0 {
			l.record("release " + l.lockOp(base+":release", contract.LockBody{Holder: holder}, &struct{}{}))
		}
		return "ok"
	})
}

// lockOp posts a lock op (or a fenced write) and decodes a 200 answer
// into ans. Its outcome: ok, refused (409: held by another, no longer
// this holder's, or the tenure over), failed (certainly not applied) or
// unknown.
func (l *lockWorkload) lockOp(url string, body, ans any) string {
	b, _ := json.Marshal(body)
	a := l.c.do(http.MethodPost, url, b)
	switch {
	case a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, ans) == nil:
		return "ok"
	case a.err == nil && a.status == http.StatusConflict:
		return "refused"
	}
	if o, _ := classifyWrite(a, ""); o.Outcome == linz.Failed {
		return "failed"
	}
	return "unknown"
}

// fencedWrite writes the resource of lock in a transaction that requires
// the lock's token to be token, and returns its outcome: applied,
// refused (409: the tenure was over), failed or unknown.
func (l *lockWorkload) fencedWrite(url, lock string, token int64, holder, requestID string, seq int) string {
	var ans contract.TxnAnswer
	outcome := l.lockOp(url+"/v1/txn", contract.TxnBody{RequestID: requestID, Ops: []contract.TxnOp{
		{Op: contract.OpCheck, Key: lock, Condition: &contract.Condition{Field: "token", Equals: mustJSON(token)}},
		{Op: contract.OpPut, Key: resourceKey(lock), Value: mustJSON(fencedWrite{Holder: holder, Token: token, Seq: seq})},
	}}, &ans)
	if outcome == "ok" {
		return "applied"
	}
	return outcome
}

// settle waits until no lock of the workload is held in the projection:
// a lease the clients left running ends with an expire event the writers'
// sweeper appends up to a second after it, and the log is read for the
// checks only once no such event can still come (after the clients
// stopped, leases last at most lockTTL).
func (l *lockWorkload) settle(ctx context.Context, db *pgxpool.Pool, timeout time.Duration) error {
	return settleNone(ctx, db, timeout, "locks: %d of the workload's locks still held %s after the clients stopped (err %v)",
		`SELECT count(*) FROM kv_entries WHERE key = ANY($1) AND live`, l.keys)
}

// settleNone waits until query (a count, with arg) answers 0, or fails
// after timeout with format (the count, timeout, the last error).
func settleNone(ctx context.Context, db *pgxpool.Pool, timeout time.Duration, format, query string, arg any) error {
	deadline := time.Now().Add(timeout)
	for {
		var n int
		err := db.QueryRow(ctx, query, arg).Scan(&n)
		switch {
		case err == nil && n == 0:
			return nil
		case time.Now().After(deadline):
			return fmt.Errorf(format, n, timeout, err)
		}
		pause(ctx.Done(), 100*time.Millisecond)
	}
}

// lockFindings are the lock workload's results and checks.
type lockFindings struct {
	collectionFindings
	tenures, writes int // tenures begun and resource writes in the log
	violations      []string
}

// check folds each lock's events and its resource's writes in log order.
func (l *lockWorkload) check(evs []logcheck.Event) lockFindings {
	f := lockFindings{collectionFindings: collectionFindings{outcomes: map[string]int{}}}
	f.outcomes, _ = l.snapshot()
	type tenure struct {
		live    bool
		token   int64
		expires *time.Time
	}
	state := map[string]*tenure{}
	maxToken := map[string]int64{}
	for _, le := range evs { // per partition in log order
		e := le.Event
		for _, lock := range l.keys {
			switch e.Key {
			case lock:
				f.events++
				t := state[lock]
				if t == nil {
					t = &tenure{}
					state[lock] = t
				}
				var v decide.LockValue
				if !e.Live() || json.Unmarshal(e.After, &v) != nil {
					*t = tenure{}
					continue
				}
				if t.live && v.Token != t.token && (t.expires == nil || e.TS.Before(*t.expires)) {
					f.violations = append(f.violations, fmt.Sprintf("%s@%d at %d/%d: granted with token %d while the tenure of token %d was live until %v: two live holders", lock, e.Version, le.Partition, le.Offset, v.Token, t.token, t.expires))
				}
				if !t.live || v.Token != t.token {
					f.tenures++
					if v.Token <= maxToken[lock] {
						f.violations = append(f.violations, fmt.Sprintf("%s@%d at %d/%d: a tenure with token %d after token %d", lock, e.Version, le.Partition, le.Offset, v.Token, maxToken[lock]))
					}
					maxToken[lock] = max(maxToken[lock], v.Token)
				}
				*t = tenure{live: true, token: v.Token, expires: e.ExpiresAt}
			case resourceKey(lock):
				f.events++
				if !e.Live() {
					continue
				}
				f.writes++
				var w fencedWrite
				if json.Unmarshal(e.After, &w) != nil {
					f.violations = append(f.violations, fmt.Sprintf("%s@%d: not a fenced write", e.Key, e.Version))
					continue
				}
				t := state[lock]
				switch {
				case t == nil || !t.live:
					f.violations = append(f.violations, fmt.Sprintf("%s@%d at %d/%d: written with token %d while %s was not held", e.Key, e.Version, le.Partition, le.Offset, w.Token, lock))
				case t.token != w.Token:
					f.violations = append(f.violations, fmt.Sprintf("%s@%d at %d/%d: written with token %d during the tenure of token %d", e.Key, e.Version, le.Partition, le.Offset, w.Token, t.token))
				case t.expires != nil && e.TS.After(*t.expires):
					f.violations = append(f.violations, fmt.Sprintf("%s@%d at %d/%d: written with token %d at %s, after the lease ended at %s", e.Key, e.Version, le.Partition, le.Offset, w.Token, e.TS.Format(time.RFC3339Nano), t.expires.Format(time.RFC3339Nano)))
				}
			}
		}
	}
	return f
}

func (f *lockFindings) print(w io.Writer) {
	f.collectionFindings.print(w, "locks", f.violations, fmt.Sprintf("%d tenures, %d fenced writes in the log, each with its tenure's token and within its lease", f.tenures, f.writes))
}
