package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/writer"
)

// scope is the key prefix of the typed-client tests (base without the
// route).
const scope = "tenant/acme/project/demo/"

func (s *stack) client() *client.Client {
	return client.New(s.url, devToken, client.WithHTTPClient(httpClient))
}

// keyEvents returns the log's events of key in version order, checking
// that versions are contiguous from 1.
func keyEvents(tb testing.TB, s *stack, key string) []contract.Event {
	tb.Helper()
	var out []contract.Event
	for _, e := range s.readLog(context.Background()) {
		if e.Key == key {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b contract.Event) int { return int(a.Version - b.Version) })
	for i, e := range out {
		if e.Version != int64(i+1) {
			tb.Fatalf("%s: version %d at position %d (gap or duplicate)", key, e.Version, i)
		}
	}
	return out
}

func code(err error) string { return contract.ErrorCode(err) }

// TestLockFiftyAcquirers: 50 clients race for one lock, hold it briefly
// and release it. From the log: one holder at any moment (a new tenure
// starts only after a release or an expired lease), fencing tokens grow
// strictly from tenure to tenure, and every 200 the clients saw is a
// tenure in the log.
func TestLockFiftyAcquirers(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	key := scope + "locks/deploy"
	const clients = 50
	rounds := 8
	if testing.Short() {
		rounds = 2
	}
	var (
		mu     sync.Mutex
		tokens []int64 // tokens answered to clients, in the order acquired
		held   atomic.Int32
		// refused counts the acquires answered lock_held: the
		// contention each tenure met.
		refused atomic.Int64
		wg      sync.WaitGroup
	)
	for i := range clients {
		wg.Go(func() {
			holder := fmt.Sprintf("worker-%02d", i)
			// A refused acquirer backs off (full jitter, doubling up to
			// 32 ms), as a client of a busy lock should: 49 clients
			// retrying every 1.5 ms spent most of this test's CPU on
			// refusals, and at 32 ms tens still meet every release.
			backoff := time.Millisecond
			for got := 0; got < rounds; {
				l, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: holder, TTL: 30 * time.Second})
				switch code(err) {
				case "":
					backoff = time.Millisecond
				case contract.ELockHeld:
					refused.Add(1)
					time.Sleep(rand.N(backoff))
					backoff = min(2*backoff, 32*time.Millisecond)
					continue
				default:
					t.Errorf("acquire: %v", err)
					return
				}
				if n := held.Add(1); n != 1 {
					t.Errorf("%d clients hold the lock at once", n)
				}
				if l.Holder != holder || l.Token != l.Version || l.Reentered {
					t.Errorf("acquired lock %+v", l)
				}
				mu.Lock()
				tokens = append(tokens, l.Token)
				mu.Unlock()
				// Re-entry keeps the tenure and its token.
				again, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: holder, TTL: 30 * time.Second})
				if err != nil || !again.Reentered || again.Token != l.Token || again.Version <= l.Version {
					t.Errorf("re-entry: %+v %v", again, err)
				}
				held.Add(-1)
				if _, err := c.ReleaseLock(ctx, client.LockRequest{Key: key, Holder: holder}); err != nil {
					t.Errorf("release: %v", err)
					return
				}
				got++
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if !slices.IsSorted(tokens) {
		t.Fatalf("tokens answered out of order: %v", tokens)
	}

	evs := keyEvents(t, s, key)
	var (
		holder   string // "" when free
		lease    time.Time
		logToken []int64
	)
	for _, e := range evs {
		switch e.Kind {
		case contract.KindPut:
			var v decide.LockValue
			if err := json.Unmarshal(e.After, &v); err != nil {
				t.Fatalf("lock value %s: %v", e.After, err)
			}
			newTenure := v.Token == e.Version
			if holder != "" && newTenure && e.TS.Before(lease) {
				t.Fatalf("version %d: %s took the lock from %s whose lease ran to %v", e.Version, v.Holder, holder, lease)
			}
			if !newTenure && v.Holder != holder {
				t.Fatalf("version %d: %s continued %s's tenure", e.Version, v.Holder, holder)
			}
			if newTenure {
				logToken = append(logToken, v.Token)
			}
			holder, lease = v.Holder, *e.ExpiresAt
		default:
			holder = ""
		}
	}
	if len(logToken) != clients*rounds || !slices.Equal(logToken, tokens) {
		t.Fatalf("%d tenures in the log, %d acquisitions answered", len(logToken), len(tokens))
	}
	t.Logf("%d clients: %d tenures, one holder at a time, tokens strictly increasing (%d .. %d); %d acquires refused meanwhile",
		clients, len(tokens), tokens[0], tokens[len(tokens)-1], refused.Load())
}

// TestLockExpiry: an expired lock is free at once for another holder, the
// old holder can neither extend nor release it, and the sweeper logs the
// expiry of an abandoned lock with its semantics.
func TestLockExpiry(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	key := scope + "locks/nightly"
	a, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "a", TTL: time.Second, Semantics: contract.Semantics{Producer: "scheduler"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "b", TTL: time.Second}); code(err) != contract.ELockHeld {
		t.Fatalf("held lock: %v", err)
	} else {
		var e *contract.Error
		errors.As(err, &e)
		if e.Current == nil || e.Current.ExpiresAt == nil || e.Current.Version != a.Version {
			t.Fatalf("lock_held must say who holds it until when: %+v", e)
		}
	}
	time.Sleep(time.Until(*a.ExpiresAt) + 10*time.Millisecond)
	b, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "b", TTL: time.Minute})
	if err != nil || b.Token <= a.Token {
		t.Fatalf("re-acquire after expiry: %+v %v (old token %d)", b, err, a.Token)
	}
	if _, err := c.ExtendLock(ctx, client.LockRequest{Key: key, Holder: "a", TTL: time.Minute}); code(err) != contract.ENotLockHolder {
		t.Fatalf("old holder extended: %v", err)
	}
	if _, err := c.ReleaseLock(ctx, client.LockRequest{Key: key, Holder: "a"}); code(err) != contract.ENotLockHolder {
		t.Fatalf("old holder released: %v", err)
	}
	if l, err := c.CheckLock(ctx, key); err != nil || l.Holder != "b" || l.Token != b.Token {
		t.Fatalf("check: %+v %v", l, err)
	}
	if _, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`1`)}); code(err) != contract.ELockHeld {
		t.Fatalf("a plain put over a held lock: %v", err)
	}

	// Abandoned: the sweeper expires it with an expire event.
	abandoned := scope + "locks/abandoned"
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: abandoned, Holder: "crashed", TTL: time.Second, Semantics: contract.Semantics{Producer: "scheduler", ConsumerHints: []string{"ops"}}}); err != nil {
		t.Fatal(err)
	}
	var expire contract.Event
	testenv.WaitFor(t, 15*time.Second, "the sweeper's expire event", func() bool {
		evs := keyEvents(t, s, abandoned)
		expire = evs[len(evs)-1]
		return expire.Kind == contract.KindExpire
	})
	if expire.Op != contract.OpExpire || expire.Principal != writer.SweeperPrincipal || expire.Semantics.Purpose != "lock" ||
		expire.Semantics.Producer != "scheduler" || expire.ExpiresAt == nil || expire.TS.Before(*expire.ExpiresAt) {
		t.Fatalf("expire event %+v", expire)
	}
	if _, err := c.CheckLock(ctx, abandoned); code(err) != contract.ENotFound {
		t.Fatalf("check of an expired lock: %v", err)
	}
}

// TestLeaderElection: one leader per pool; heartbeats keep the term;
// resigning lets another candidate in with a higher term.
func TestLeaderElection(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	pool := scope + "leaders/build-manager"
	if _, err := c.Leader(ctx, pool); code(err) != contract.ENotFound {
		t.Fatalf("leader of an empty pool: %v", err)
	}
	a, err := c.Elect(ctx, client.LockRequest{Key: pool, Holder: "agent-a", TTL: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Elect(ctx, client.LockRequest{Key: pool, Holder: "agent-b", TTL: 10 * time.Second}); code(err) != contract.ENotLeader {
		t.Fatalf("second candidate: %v", err)
	}
	if _, err := c.Heartbeat(ctx, client.LockRequest{Key: pool, Holder: "agent-b", TTL: 10 * time.Second}); code(err) != contract.ENotLeader {
		t.Fatalf("heartbeat of a non-leader: %v", err)
	}
	hb, err := c.Heartbeat(ctx, client.LockRequest{Key: pool, Holder: "agent-a", TTL: 10 * time.Second})
	if err != nil || hb.Token != a.Token || !hb.ExpiresAt.After(*a.ExpiresAt) {
		t.Fatalf("heartbeat: %+v %v", hb, err)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: pool, Holder: "agent-a"}); code(err) != contract.EWrongType {
		t.Fatalf("a leader pool taken as a lock: %v", err)
	}
	if _, err := c.Resign(ctx, client.LockRequest{Key: pool, Holder: "agent-b"}); code(err) != contract.ENotLeader {
		t.Fatalf("resign of a non-leader: %v", err)
	}
	if _, err := c.Resign(ctx, client.LockRequest{Key: pool, Holder: "agent-a"}); err != nil {
		t.Fatal(err)
	}
	b, err := c.Elect(ctx, client.LockRequest{Key: pool, Holder: "agent-b", TTL: 10 * time.Second})
	if err != nil || b.Token <= a.Token {
		t.Fatalf("election after resign: %+v %v", b, err)
	}
	if l, err := c.Leader(ctx, pool); err != nil || l.Holder != "agent-b" {
		t.Fatalf("leader: %+v %v", l, err)
	}
	ops := []string{}
	for _, e := range keyEvents(t, s, pool) {
		ops = append(ops, string(e.Op))
	}
	if want := []string{"leader_elect", "leader_heartbeat", "leader_resign", "leader_elect"}; !slices.Equal(ops, want) {
		t.Fatalf("log ops %v, want %v", ops, want)
	}
}

// TestCounterConcurrentIncrements: 32 clients add and subtract; the
// counter ends at the exact sum and has one version per increment.
func TestCounterConcurrentIncrements(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	key := scope + "counters/requests"
	const clients = 32
	per := 50
	if testing.Short() {
		per = 10
	}
	var (
		sum atomic.Int64
		wg  sync.WaitGroup
	)
	for i := range clients {
		wg.Go(func() {
			for j := range per {
				by := int64(rand.IntN(9) + 1)
				if (i+j)%4 == 0 {
					by = -by
				}
				if _, err := c.Increment(ctx, client.IncrementRequest{Key: key, By: by, Create: true}); err != nil {
					t.Errorf("increment: %v", err)
					return
				}
				sum.Add(by)
			}
		})
	}
	wg.Wait()
	e, err := c.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Value) != fmt.Sprint(sum.Load()) || e.Version != clients*int64(per) || e.Semantics.Purpose != "counter" {
		t.Fatalf("counter %s version %d, want %d after %d increments", e.Value, e.Version, sum.Load(), clients*per)
	}
	if n := len(keyEvents(t, s, key)); n != clients*per {
		t.Fatalf("%d events for %d increments", n, clients*per)
	}

	// Idempotent with a requestId; typed errors otherwise.
	r1, err := c.Increment(ctx, client.IncrementRequest{Key: key, By: 100, RequestID: "inc-1"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := c.Increment(ctx, client.IncrementRequest{Key: key, By: 100, RequestID: "inc-1"})
	if err != nil || !r2.Replayed || r2.Value != r1.Value {
		t.Fatalf("replayed increment: %+v %v", r2, err)
	}
	if _, err := c.Increment(ctx, client.IncrementRequest{Key: scope + "counters/missing"}); code(err) != contract.ENotFound {
		t.Fatalf("increment of a missing counter without create: %v", err)
	}
	if _, err := c.Put(ctx, client.PutRequest{Key: scope + "counters/text", Value: json.RawMessage(`"x"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Increment(ctx, client.IncrementRequest{Key: scope + "counters/text"}); code(err) != contract.EWrongType {
		t.Fatalf("increment of a string: %v", err)
	}
	d, err := c.Decrement(ctx, key, 1, false)
	if err != nil || d.Value != r1.Value-1 {
		t.Fatalf("decrement: %+v %v", d, err)
	}
}

// TestFieldCASJobClaims: 20 workers race to claim 1,000 jobs with a field
// compare-and-swap (state pending -> claimed); each job is claimed exactly
// once, by the worker its record names.
func TestFieldCASJobClaims(t *testing.T) {
	t.Parallel()
	// Service processes, built without the race detector (a third less
	// of CI's CPU for 21,000 patches); the in-process field tests keep
	// the detector on the same paths.
	s := mustProcStack(t).stack
	c := s.client()
	ctx := context.Background()
	jobs, workers := 1000, 20
	if testing.Short() {
		jobs = 100
	}
	job := func(i int) string { return fmt.Sprintf("%sjobs/email-send/job-%04d", scope, i) }
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			_, err := c.Patch(ctx, client.PatchRequest{Key: job(i), Create: true, ExpectedVersion: new(int64),
				Set: map[string]json.RawMessage{"state": json.RawMessage(`"pending"`), "task_id": json.RawMessage(fmt.Sprintf(`"job-%04d"`, i))}})
			if err != nil {
				t.Errorf("create job: %v", err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	claims := make([][]string, jobs)
	var mu sync.Mutex
	var lost atomic.Int64
	for w := range workers {
		wg.Go(func() {
			name := fmt.Sprintf("w%02d", w)
			for _, i := range rand.Perm(jobs) {
				_, err := c.Patch(ctx, client.PatchRequest{Key: job(i),
					If:  &client.FieldCondition{Field: "state", Equals: json.RawMessage(`"pending"`)},
					Set: map[string]json.RawMessage{"state": json.RawMessage(`"claimed"`), "worker": json.RawMessage(`"` + name + `"`)}})
				switch code(err) {
				case "":
					mu.Lock()
					claims[i] = append(claims[i], name)
					mu.Unlock()
				case contract.EFieldMismatch:
					lost.Add(1)
				default:
					t.Errorf("claim: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, cl := range claims {
		if len(cl) != 1 {
			t.Fatalf("job %d claimed %d times: %v", i, len(cl), cl)
		}
		f, err := c.GetField(ctx, job(i), "worker")
		if err != nil || string(f.Value) != `"`+cl[0]+`"` {
			t.Fatalf("job %d: worker field %s (%v), claimed by %s", i, f.Value, err, cl[0])
		}
	}
	if lost.Load() != int64(jobs*(workers-1)) {
		t.Fatalf("%d lost claims, want %d", lost.Load(), jobs*(workers-1))
	}
	if _, err := c.GetField(ctx, job(0), "nope"); code(err) != contract.ENotFound {
		t.Fatalf("missing field: %v", err)
	}
	t.Logf("%d workers, %d jobs: each claimed once; %d claims lost the race", workers, jobs, lost.Load())
}

// TestSweeperExpiresEntries: the sweeper appends one expire event per
// expired entry, with its semantics; a renewal before the sweep wins.
func TestSweeperExpiresEntries(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := context.Background()
	const n = 40
	// The renewed entry is renewed at once, before the others are
	// written: the renewal must reach it before its 2 s expire, however
	// busy the machine (tests run in parallel).
	renewed := scope + "flags/tmp-00"
	for i := range n {
		if _, err := c.Put(ctx, client.PutRequest{Key: fmt.Sprintf("%sflags/tmp-%02d", scope, i), Value: json.RawMessage(`true`), TTL: 2 * time.Second,
			Semantics: contract.Semantics{Purpose: "feature_flag", Producer: "flags-admin"}}); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			continue
		}
		e, err := c.Put(ctx, client.PutRequest{Key: renewed, Value: json.RawMessage(`true`), TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if e.Entry.Version != 2 {
			t.Fatalf("renewal answered version %d, want 2: the entry expired before it was renewed", e.Entry.Version)
		}
	}
	var expired map[string]contract.Event
	testenv.WaitFor(t, 20*time.Second, "expire events", func() bool {
		expired = map[string]contract.Event{}
		for _, e := range s.readLog(ctx) {
			if e.Kind == contract.KindExpire {
				expired[e.Key] = e
			}
		}
		return len(expired) >= n-1
	})
	if _, ok := expired[renewed]; ok {
		t.Fatalf("the renewed entry was expired")
	}
	for k, e := range expired {
		if e.Semantics.Purpose != "feature_flag" || e.Semantics.Producer != "flags-admin" || e.Principal != writer.SweeperPrincipal || string(e.Before) != "true" {
			t.Fatalf("%s: expire event %+v", k, e)
		}
	}
	if len(expired) != n-1 {
		t.Fatalf("%d expire events, want %d", len(expired), n-1)
	}
	if _, err := c.Get(ctx, renewed); err != nil {
		t.Fatalf("renewed entry: %v", err)
	}
}
