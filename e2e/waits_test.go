package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// awaitWaiters waits until base's writer holds n parked waits
// (eskv_writer_waiters): how the tests order arrivals.
func awaitWaiters(tb testing.TB, base string, n int) {
	tb.Helper()
	testenv.WaitFor(tb, 30*time.Second, fmt.Sprintf("%d waiters at %s", n, base), func() bool {
		return scrapedMetric(tb, base, "eskv_writer_waiters") == float64(n)
	})
}

// TestWaitQPopAnsweredOnPush: a qpop waiting on an empty queue is
// answered the item as soon as a push commits (its latency measured from
// the push's answer), a blocking lpop likewise; a wait that ends first
// answers exactly as an empty pop without wait does (404 queue_empty,
// 404 not_found), no sooner than its wait.
func TestWaitQPopAnsweredOnPush(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := t.Context()
	queue := scope + "waits/jobs"

	type popped struct {
		a   client.QueuePop
		err error
		at  time.Time
	}
	got := make(chan popped, 1)
	go func() {
		a, err := c.QPop(ctx, client.QPopRequest{Key: queue, Wait: 20 * time.Second})
		got <- popped{a, err, time.Now()}
	}()
	awaitWaiters(t, s.url, 1)
	if _, err := c.QPush(ctx, client.QPushRequest{Key: queue, Data: json.RawMessage(`{"job":1}`)}); err != nil {
		t.Fatal(err)
	}
	pushed := time.Now()
	p := <-got
	if p.err != nil || string(p.a.Data) != `{"job":1}` {
		t.Fatalf("waiting qpop: %+v %v", p.a, p.err)
	}
	latency := p.at.Sub(pushed)
	t.Logf("waiting qpop answered %v after the push's answer", latency)
	if latency > 3*time.Second {
		t.Errorf("waiting qpop answered %v after the push, want well under 3s", latency)
	}

	list := scope + "waits/log"
	lgot := make(chan error, 1)
	go func() {
		a, err := c.LPopWait(ctx, list, 20*time.Second)
		if err == nil && string(a.Value) != `"v"` {
			err = fmt.Errorf("popped %s", a.Value)
		}
		lgot <- err
	}()
	awaitWaiters(t, s.url, 1)
	if _, err := c.RPush(ctx, client.PushRequest{Key: list, Value: json.RawMessage(`"v"`)}); err != nil {
		t.Fatal(err)
	}
	if err := <-lgot; err != nil {
		t.Fatalf("waiting lpop: %v", err)
	}

	for _, tc := range []struct {
		name, path, code string
	}{
		{"ErrQueueEmptyAfterWait", "/v1/kv/" + queue + ":qpop?wait=700ms", contract.EQueueEmpty},
		{"ErrListEmptyAfterWait", "/v1/kv/" + list + ":lpop?wait=700ms", contract.ENotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			r := s.do("POST", tc.path, devToken, nil)
			took := time.Since(start)
			noWait := s.do("POST", strings.Split(tc.path, "?")[0], devToken, nil)
			if r.Status != http.StatusNotFound || r.errorBody(t).Code != tc.code || took < 700*time.Millisecond {
				t.Fatalf("%s: %d %s after %v, want 404 %s after 700ms", tc.path, r.Status, r.Body, took, tc.code)
			}
			if a, b := noWait.errorBody(t), r.errorBody(t); noWait.Status != r.Status || a.Code != b.Code || a.Field != b.Field || a.Message != b.Message {
				t.Fatalf("the wait's end answered %d %s; a pop without wait %d %s", r.Status, r.Body, noWait.Status, noWait.Body)
			}
		})
	}
	t.Run("ErrWaitOverMax", func(t *testing.T) {
		r := s.do("POST", "/v1/kv/"+queue+":qpop?wait=45s", devToken, nil)
		if e := r.errorBody(t); r.Status != http.StatusBadRequest || e.Field != contract.WaitParam {
			t.Fatalf("wait=45s: %d %s, want 400 naming wait", r.Status, r.Body)
		}
	})
}

// TestWaitLockFIFO: 20 acquires waiting on a held lock, each sent once
// the one before it is queued at the writer, are granted in arrival
// order, one per release; an acquire without wait meanwhile is
// lock_held. Every grant is an ordinary acquire event of the log, its
// token the version it was granted at.
func TestWaitLockFIFO(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	c := s.client()
	ctx := t.Context()
	key := scope + "waits/mutex"
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "h0", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	const n = 20
	granted := make([]chan client.Lock, n+1)
	for i := 1; i <= n; i++ {
		granted[i] = make(chan client.Lock, 1)
		go func() {
			l, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: fmt.Sprintf("h%d", i), TTL: time.Minute, Wait: 29 * time.Second})
			if err != nil {
				t.Errorf("h%d: %v", i, err)
			}
			granted[i] <- l
		}()
		awaitWaiters(t, s.url, i)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "barger", TTL: time.Minute}); contract.ErrorCode(err) != contract.ELockHeld {
		t.Fatalf("an acquire without wait while 20 wait: %v, want lock_held", err)
	}
	var tokens []int64
	for i := 1; i <= n; i++ {
		if _, err := c.ReleaseLock(ctx, client.LockRequest{Key: key, Holder: fmt.Sprintf("h%d", i-1)}); err != nil {
			t.Fatalf("release h%d: %v", i-1, err)
		}
		select {
		case l := <-granted[i]:
			if l.Holder != fmt.Sprintf("h%d", i) {
				t.Fatalf("grant %d went to %s", i, l.Holder)
			}
			tokens = append(tokens, l.Token)
		case <-time.After(20 * time.Second):
			t.Fatalf("h%d not granted within 20s of h%d's release", i, i-1)
		}
	}
	var acquires []string
	for _, e := range keyEvents(t, s, key) {
		if e.Op == contract.OpLockAcquire {
			var v struct{ Holder string }
			_ = json.Unmarshal(e.After, &v)
			acquires = append(acquires, v.Holder)
		}
	}
	want := []string{"h0"}
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("h%d", i))
	}
	if strings.Join(acquires, ",") != strings.Join(want, ",") {
		t.Fatalf("the log's acquires %v, want %v", acquires, want)
	}
	t.Logf("20 waiters granted in arrival order; tokens %v", tokens)
}

// TestWaitersSharePerPrincipal: a principal's waits beyond
// ESKV_MAX_WAITERS_PER_PRINCIPAL answer 429 at once, naming the setting,
// with Retry-After; its pops without wait still answer.
func TestWaitersSharePerPrincipal(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.API(api.Config{MaxWaitersPerPrincipal: 2}))
	queue := "/v1/kv/" + scope + "waits/share"
	held := make(chan response, 2)
	for i := range 2 {
		go func() { held <- s.do("POST", queue+":qpop?wait=3s", devToken, nil) }()
		awaitWaiters(t, s.url, i+1)
	}
	r := s.do("POST", queue+":qpop?wait=3s", devToken, nil)
	if e := r.errorBody(t); r.Status != http.StatusTooManyRequests || e.Code != contract.ETooManyRequests ||
		e.Field != api.SettingMaxWaitersPerPrincipal || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a third wait: %d %s (Retry-After %q), want 429 naming %s", r.Status, r.Body, r.Header.Get("Retry-After"), api.SettingMaxWaitersPerPrincipal)
	}
	if r := s.do("POST", queue+":qpop", devToken, nil); r.Status != http.StatusNotFound {
		t.Fatalf("a pop without wait meanwhile: %d %s, want 404 queue_empty", r.Status, r.Body)
	}
	for range 2 {
		if r := <-held; r.Status != http.StatusNotFound {
			t.Errorf("a held wait: %d %s, want 404 queue_empty at its end", r.Status, r.Body)
		}
	}
}

// TestWaitFailover: two writer processes; a qpop waiting at the owner of
// its queue is answered 503 at once when the owner stops (not at the end
// of its wait), and a client waiting through the other writer, retried
// with what is left of its wait, gets the item pushed after the
// partition moved.
func TestWaitFailover(t *testing.T) {
	t.Parallel()
	ps := mustWriterProcs(t, 2)
	queue := "tenant/waitfo/project/p/jobs"
	part := partitionOf(t, queue)
	var owner, other int
	testenv.WaitFor(t, 60*time.Second, "the queue's owner known", func() bool {
		owners, err := ps.store.Owners(context.Background())
		if err != nil {
			return false
		}
		for i := range ps.urls {
			if owners[part].ID == fmt.Sprintf("w%d", i) {
				owner, other = i, 1-i
				return true
			}
		}
		return false
	})
	direct := make(chan int, 1)
	var stopped time.Time
	go func() {
		code, _ := devCall("POST", ps.urls[owner]+"/v1/kv/"+queue+":qpop?wait=25s", "")
		direct <- code
	}()
	awaitWaiters(t, ps.urls[owner], 1)
	c := client.New(ps.urls[other], devToken)
	type popped struct {
		a   client.QueuePop
		err error
	}
	viaOther := make(chan popped, 1)
	go func() {
		a, err := c.QPop(context.Background(), client.QPopRequest{Key: queue, Wait: 28 * time.Second})
		viaOther <- popped{a, err}
	}()
	awaitWaiters(t, ps.urls[owner], 2) // forwarded to the owner
	stopped = time.Now()
	ps.writers[owner].Stop(20 * time.Second)
	select {
	case code := <-direct:
		if code != http.StatusServiceUnavailable {
			t.Errorf("the wait at the stopping owner answered %d, want 503", code)
		}
		t.Logf("the wait at the stopping owner answered %d %v after the stop began", code, time.Since(stopped))
	case <-time.After(15 * time.Second):
		t.Fatal("the wait at the stopped owner still waits 15s after the stop")
	}
	testenv.WaitFor(t, 30*time.Second, "a push through the surviving writer", func() bool {
		_, err := c.QPush(context.Background(), client.QPushRequest{Key: queue, Data: json.RawMessage(`"after"`), RequestID: "push-after-failover"})
		return err == nil
	})
	select {
	case p := <-viaOther:
		if p.err != nil || string(p.a.Data) != `"after"` {
			t.Fatalf("the client's wait across the failover: %+v %v", p.a, p.err)
		}
		t.Logf("the client's wait got the item %v after the stop began", time.Since(stopped))
	case <-time.After(30 * time.Second):
		t.Fatal("the client's wait across the failover was not answered")
	}
	if _, err := c.QPop(context.Background(), client.QPopRequest{Key: queue}); !errors.Is(err, client.ErrQueueEmpty) {
		t.Fatalf("the queue after its one item was popped: %v, want empty (no item delivered twice)", err)
	}
}
