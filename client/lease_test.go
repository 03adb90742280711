//go:build go1.25

// These tests run in testing/synctest's bubbles, which came with Go 1.25;
// the client itself needs only the go.mod's version.

package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// fakeLocks is an http.RoundTripper that answers the lock and leader
// verbs from memory on synctest's fake clock, so a lease's timing is
// tested over many TTLs in no time. The real server's rules are tested
// in writer/; clienttest's TestKeepLockStack, in eskv's module, runs a
// lease against it.
type fakeLocks struct {
	mu    sync.Mutex
	down  bool // answer 503 partition_unavailable
	locks map[string]*fakeLock
	ver   int64
	calls []fakeCall
}

type fakeLock struct {
	holder   string
	token    int64
	acquired time.Time
	expires  time.Time
}

type fakeCall struct {
	verb string
	at   time.Time
	ok   bool
}

func newFakeLocks() *fakeLocks { return &fakeLocks{locks: map[string]*fakeLock{}} }

func (f *fakeLocks) RoundTrip(r *http.Request) (*http.Response, error) {
	var body struct {
		Holder     string `json:"holder"`
		TTLSeconds *int64 `json:"ttlSeconds"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return nil, err
	}
	r.Body.Close()
	i := strings.LastIndex(r.URL.Path, ":")
	key, verb := strings.TrimPrefix(r.URL.Path[:i], "/v1/kv/"), r.URL.Path[i+1:]
	ttl := 60 * time.Second
	if body.TTLSeconds != nil {
		ttl = time.Duration(*body.TTLSeconds) * time.Second
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	status, answer := f.decide(key, verb, body.Holder, ttl)
	f.calls = append(f.calls, fakeCall{verb: verb, at: time.Now(), ok: status == http.StatusOK})
	b, _ := json.Marshal(answer)
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(string(b))), Request: r}, nil
}

// decide applies one verb as the writer does, with a lease that ends at
// the decision's time plus the TTL.
func (f *fakeLocks) decide(key, verb, holder string, ttl time.Duration) (int, any) {
	refuse := func(code, msg string) (int, any) {
		return http.StatusConflict, map[string]any{"error": map[string]string{"code": code, "message": msg}}
	}
	if f.down {
		return http.StatusServiceUnavailable, map[string]any{"error": map[string]string{"code": contract.EUnavailable, "message": "catching up"}}
	}
	now := time.Now()
	l := f.locks[key]
	if l != nil && !now.Before(l.expires) {
		l = nil
	}
	notHolder, held := contract.ENotLockHolder, contract.ELockHeld
	if verb == "elect" || verb == "heartbeat" || verb == "resign" {
		notHolder, held = contract.ENotLeader, contract.ENotLeader
	}
	switch {
	case verb == "acquire" || verb == "elect":
		if l != nil && l.holder != holder {
			return refuse(held, key+" is held by "+l.holder)
		}
	case l == nil || l.holder != holder:
		return refuse(notHolder, holder+" does not hold "+key)
	case verb == "release" || verb == "resign":
		delete(f.locks, key)
		f.ver++
		return http.StatusOK, client.ReleaseResult{Key: key, Version: f.ver, Released: true}
	}
	f.ver++
	reentered := l != nil
	if l == nil {
		l = &fakeLock{holder: holder, token: f.ver, acquired: now}
		f.locks[key] = l
	}
	l.expires = now.Add(ttl)
	return http.StatusOK, client.Lock{Key: key, Holder: holder, Token: l.token, Version: f.ver, AcquiredAt: l.acquired, ExpiresAt: &l.expires, Reentered: reentered}
}

func (f *fakeLocks) setDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// holder is the key's holder now, "" when free.
func (f *fakeLocks) holder(key string) (string, int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.locks[key]; l != nil && time.Now().Before(l.expires) {
		return l.holder, l.token
	}
	return "", 0
}

// give makes holder the key's holder as a new tenure, as an operator
// breaking the lock and another taking it would.
func (f *fakeLocks) give(key, holder string, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ver++
	f.locks[key] = &fakeLock{holder: holder, token: f.ver, acquired: time.Now(), expires: time.Now().Add(ttl)}
}

// count is how many calls of verb came (that succeeded, if ok).
func (f *fakeLocks) count(verb string, ok bool) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.verb == verb && (c.ok || !ok) {
			n++
		}
	}
	return n
}

func (f *fakeLocks) callsOf(verb string) []fakeCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fakeCall
	for _, c := range f.calls {
		if c.verb == verb {
			out = append(out, c)
		}
	}
	return out
}

const lockKey = "tenant/a/project/b/locks/job"

func fakeClient(f *fakeLocks) *client.Client {
	return client.New("http://eskv.test", testToken, client.WithHTTPClient(&http.Client{Transport: f}))
}

func mustKeep(t *testing.T, ctx context.Context, c *client.Client, holder string, ttl time.Duration, opts ...client.LeaseOption) *client.Lease {
	t.Helper()
	l, err := c.KeepLock(ctx, client.LockRequest{Key: lockKey, Holder: holder, TTL: ttl}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func isDone(l *client.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// TestKeepLock runs leases against fakeLocks in virtual time; synctest
// also fails a test whose renewal goroutine outlives it.
func TestKeepLock(t *testing.T) {
	bubble(t, "RenewsPastManyTTLs", func(t *testing.T, f *fakeLocks) {
		l := mustKeep(t, t.Context(), fakeClient(f), "me", 3*time.Second)
		time.Sleep(30 * time.Second)
		if h, tok := f.holder(lockKey); h != "me" || tok != l.Token() || isDone(l) || l.Err() != nil {
			t.Fatalf("after 10 TTLs: holder %q token %d (want %d), done %v, err %v", h, tok, l.Token(), isDone(l), l.Err())
		}
		if n := f.count("extend", true); n < 28 || n > 31 {
			t.Fatalf("%d extends in 30s, want one a second", n)
		}
		if got := l.Lock(); got.ExpiresAt == nil || got.ExpiresAt.Before(time.Now()) {
			t.Fatalf("Lock() is not the latest renewal: %+v", got)
		}
		mustRelease(t, l)
	})

	bubble(t, "ReleaseStopsRenewalAndFrees", func(t *testing.T, f *fakeLocks) {
		l := mustKeep(t, t.Context(), fakeClient(f), "me", 3*time.Second)
		time.Sleep(5 * time.Second)
		mustRelease(t, l)
		if !isDone(l) || !errors.Is(l.Err(), client.ErrLeaseReleased) || l.Context().Err() == nil {
			t.Fatalf("after Release: done %v, err %v", isDone(l), l.Err())
		}
		if h, _ := f.holder(lockKey); h != "" {
			t.Fatalf("still held by %q after Release", h)
		}
		extends := f.count("extend", false)
		time.Sleep(time.Minute)
		if err := l.Release(context.Background()); err != nil {
			t.Fatalf("second Release: %v", err)
		}
		if n, r := f.count("extend", false), f.count("release", false); n != extends || r != 1 {
			t.Fatalf("after Release: %d more extends, %d releases (want 0 and 1)", n-extends, r)
		}
	})

	bubble(t, "CtxEndStopsRenewalAndKeepsLock", func(t *testing.T, f *fakeLocks) {
		ctx, cancel := context.WithCancel(t.Context())
		l := mustKeep(t, ctx, fakeClient(f), "me", 3*time.Second)
		time.Sleep(2 * time.Second)
		cancel()
		synctest.Wait()
		if !isDone(l) || !errors.Is(l.Err(), context.Canceled) {
			t.Fatalf("after cancel: done %v, err %v", isDone(l), l.Err())
		}
		extends := f.count("extend", false)
		if h, _ := f.holder(lockKey); h != "me" || f.count("release", false) != 0 {
			t.Fatalf("cancel released the lock: holder %q", h)
		}
		time.Sleep(10 * time.Second)
		if n := f.count("extend", false); n != extends {
			t.Fatalf("%d extends after cancel", n-extends)
		}
		if h, _ := f.holder(lockKey); h != "" {
			t.Fatalf("the lease did not end: held by %q", h)
		}
	})

	bubble(t, "LostWhenAnotherTakesOver", func(t *testing.T, f *fakeLocks) {
		l := mustKeep(t, t.Context(), fakeClient(f), "me", 3*time.Second)
		time.Sleep(1500 * time.Millisecond)
		f.give(lockKey, "other", time.Hour)
		select {
		case <-l.Done():
		case <-time.After(3 * time.Second):
			t.Fatal("Done did not close when another holder took the lock")
		}
		var lost *client.LostError
		if !errors.Is(l.Err(), client.ErrLeaseLost) || !errors.As(l.Err(), &lost) || lost.Unconfirmed ||
			contract.ErrorCode(l.Err()) != contract.ENotLockHolder || lost.Key != lockKey || lost.Token != l.Token() {
			t.Fatalf("Err after another took over: %#v", l.Err())
		}
		if !errors.Is(context.Cause(l.Context()), client.ErrLeaseLost) {
			t.Fatalf("Context's cause: %v", context.Cause(l.Context()))
		}
		if err := l.Release(context.Background()); !errors.Is(err, client.ErrLeaseLost) || f.count("release", false) != 0 {
			t.Fatalf("Release after a confirmed loss: %v, %d releases sent", err, f.count("release", false))
		}
		if h, _ := f.holder(lockKey); h != "other" {
			t.Fatalf("holder %q, want other", h)
		}
	})

	bubble(t, "LostBeforeLeaseEndsWhenRenewalsFail", func(t *testing.T, f *fakeLocks) {
		ttl, margin := 6*time.Second, 500*time.Millisecond
		l := mustKeep(t, t.Context(), fakeClient(f), "me", ttl, client.WithMargin(margin))
		time.Sleep(4500 * time.Millisecond) // past the renewal at 4s
		f.setDown(true)
		lastOK := f.callsOf("extend")[len(f.callsOf("extend"))-1].at
		<-l.Done()
		lostAt := time.Now()
		var lost *client.LostError
		if !errors.As(l.Err(), &lost) || !lost.Unconfirmed || contract.ErrorCode(lost.Err) != contract.EUnavailable {
			t.Fatalf("Err when no renewal got through: %#v", l.Err())
		}
		// The renewal that succeeded was sent at lastOK: the server's
		// lease ends at lastOK+ttl at the earliest.
		if end := lastOK.Add(ttl); lostAt.After(end.Add(-margin)) {
			t.Fatalf("lost at %v, after the margin before the lease's end %v", lostAt.Sub(lastOK), ttl-margin)
		}
		calls := f.callsOf("extend")
		for _, c := range calls {
			if c.at.After(lastOK.Add(ttl - margin)) {
				t.Fatalf("an extend was sent %v after the last good one: past the deadline %v", c.at.Sub(lastOK), ttl-margin)
			}
		}
		if len(calls) < 4 {
			t.Fatalf("%d extends: the failing renewal was not retried", len(calls))
		}
		// Another holder takes the lock once the lease has ended.
		time.Sleep(time.Until(lastOK.Add(ttl)))
		f.setDown(false)
		if _, err := fakeClient(f).AcquireLock(t.Context(), client.LockRequest{Key: lockKey, Holder: "other", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
		// Unconfirmed: Release still tries, and the server refuses.
		if err := l.Release(context.Background()); contract.ErrorCode(err) != contract.ENotLockHolder {
			t.Fatalf("Release after an unconfirmed loss: %v", err)
		}
		if h, _ := f.holder(lockKey); h != "other" {
			t.Fatalf("holder %q, want other", h)
		}
	})

	bubble(t, "LostWhenTakenAgainUnderNewToken", func(t *testing.T, f *fakeLocks) {
		l := mustKeep(t, t.Context(), fakeClient(f), "me", 3*time.Second)
		f.give(lockKey, "me", time.Hour) // released and taken again by the same holder
		<-l.Done()
		var lost *client.LostError
		if !errors.As(l.Err(), &lost) || lost.NewToken == 0 || lost.NewToken == l.Token() || !strings.Contains(lost.Error(), "token") {
			t.Fatalf("Err after a new tenure: %#v", l.Err())
		}
		if err := l.Release(context.Background()); !errors.Is(err, client.ErrLeaseLost) || f.count("release", false) != 0 {
			t.Fatalf("Release freed the other tenure: %v", err)
		}
	})

	bubble(t, "ErrReentered", func(t *testing.T, f *fakeLocks) {
		f.give(lockKey, "me", time.Hour)
		l, err := fakeClient(f).KeepLock(t.Context(), client.LockRequest{Key: lockKey, Holder: "me", TTL: 3 * time.Second})
		var re *client.ReenteredError
		if l != nil || !errors.As(err, &re) || re.Lock.Holder != "me" || !strings.Contains(err.Error(), "me already holds") {
			t.Fatalf("KeepLock of a lock the holder holds: %v, %v", l, err)
		}
		time.Sleep(time.Minute)
		if n := f.count("acquire", false) + f.count("extend", false) + f.count("release", false); n != 1 {
			t.Fatalf("%d calls, want the acquire only", n)
		}
	})

	bubble(t, "ErrHeld", func(t *testing.T, f *fakeLocks) {
		f.give(lockKey, "other", time.Hour)
		if _, err := fakeClient(f).KeepLock(t.Context(), client.LockRequest{Key: lockKey, Holder: "me"}); contract.ErrorCode(err) != contract.ELockHeld {
			t.Fatalf("KeepLock of a held lock: %v", err)
		}
	})

	bubble(t, "WithTakeWaitsForTheLock", func(t *testing.T, f *fakeLocks) {
		f.give(lockKey, "other", 5*time.Second)
		tries := 0
		wait := client.WithTake(func(ctx context.Context, try func(context.Context) (client.Lock, error)) (client.Lock, error) {
			for {
				tries++
				l, err := try(ctx)
				if contract.ErrorCode(err) != contract.ELockHeld {
					return l, err
				}
				time.Sleep(time.Second)
			}
		})
		l := mustKeep(t, t.Context(), fakeClient(f), "me", 3*time.Second, wait)
		if tries < 5 {
			t.Fatalf("took the lock after %d tries", tries)
		}
		// The lease runs from the successful try: renewals keep it.
		time.Sleep(10 * time.Second)
		if h, _ := f.holder(lockKey); h != "me" || l.Err() != nil {
			t.Fatalf("holder %q, err %v", h, l.Err())
		}
		mustRelease(t, l)
	})

	bubble(t, "DefaultTTLIsTheServers", func(t *testing.T, f *fakeLocks) {
		l := mustKeep(t, t.Context(), fakeClient(f), "me", 0)
		time.Sleep(59 * time.Second)
		if n := f.count("extend", true); n != 2 {
			t.Fatalf("%d extends in 59s of a 60s lease, want 2 (every 20s)", n)
		}
		mustRelease(t, l)
	})

	bubble(t, "Leadership", func(t *testing.T, f *fakeLocks) {
		l, err := fakeClient(f).KeepLeadership(t.Context(), client.LockRequest{Key: lockKey, Holder: "me", TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		f.give(lockKey, "other", time.Hour)
		<-l.Done()
		if contract.ErrorCode(l.Err()) != contract.ENotLeader || f.count("heartbeat", true) < 9 || f.count("elect", true) != 1 {
			t.Fatalf("leadership: err %v, %d heartbeats", l.Err(), f.count("heartbeat", true))
		}
		l, err = fakeClient(f).KeepLeadership(t.Context(), client.LockRequest{Key: lockKey + "2", Holder: "me", TTL: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Release(t.Context()); err != nil || f.count("resign", true) != 1 {
			t.Fatalf("Release of a leadership: %v, %d resigns", err, f.count("resign", true))
		}
	})
}

// bubble runs a subtest in virtual time against a fresh fakeLocks.
func bubble(t *testing.T, name string, test func(t *testing.T, f *fakeLocks)) {
	t.Run(name, func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { test(t, newFakeLocks()) })
	})
}

func mustRelease(t *testing.T, l *client.Lease) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}
