package api_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
)

// TestWaitParam: wait is read on the ops that wait, bounded by
// contract.MaxWait (400 naming wait beyond it) and by the request's
// deadline; other lock ops ignore it.
func TestWaitParam(t *testing.T) {
	for _, tc := range []struct {
		name, path, body string
		status           int
		min, max         time.Duration // the wait the writer was handed
	}{
		{"OKQPop", key + "q:qpop?wait=2s", ``, 200, time.Second, 2 * time.Second},
		{"OKLPopSeconds", key + "l:lpop?wait=3", ``, 200, 2 * time.Second, 3 * time.Second},
		{"OKRPopMillis", key + "l:rpop?wait=1500ms", ``, 200, time.Second, 1500 * time.Millisecond},
		{"OKAcquire", key + "m:acquire?wait=30s", `{"holder":"h","ttlSeconds":10}`, 200, 29 * time.Second, 30 * time.Second},
		{"OKQPopNoWait", key + "q:qpop", ``, 200, 0, 0},
		{"OKQPopZero", key + "q:qpop?wait=0", ``, 200, 0, 0},
		{"OKReleaseIgnoresWait", key + "m:release?wait=5s", `{"holder":"h"}`, 200, 0, 0},
		{"ErrOverMax", key + "q:qpop?wait=31s", ``, 400, 0, 0},
		{"ErrGarbage", key + "l:lpop?wait=soon", ``, 400, 0, 0},
		{"ErrNegative", key + "m:acquire?wait=-1s", `{"holder":"h","ttlSeconds":10}`, 400, 0, 0},
		{"ErrTwice", key + "q:qpop?wait=1s&wait=2s", ``, 400, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			rec := serve(mustServer(t, w), "POST", tc.path, tc.body)
			if tc.status != 200 {
				wantError(t, rec, tc.status, contract.EInvalid, contract.WaitParam, "")
				if len(w.reqs) != 0 {
					t.Fatal("the writer was asked")
				}
				return
			}
			if rec.Code != 200 || len(w.reqs) != 1 {
				t.Fatalf("%d %s, %d requests", rec.Code, rec.Body.String(), len(w.reqs))
			}
			if got := w.reqs[0].Wait; got < tc.min || got > tc.max {
				t.Fatalf("wait handed to the writer %v, want %v to %v", got, tc.min, tc.max)
			}
		})
	}
}

// TestWaiterSharePerPrincipal: a principal holding its share of waiting
// requests is answered 429 naming ESKV_MAX_WAITERS_PER_PRINCIPAL, with
// Retry-After, at once; another principal's wait is taken meanwhile.
func TestWaiterSharePerPrincipal(t *testing.T) {
	w := &fakeWriter{waiting: make(chan struct{}), entered: make(chan struct{}, 8)}
	h, reg := twoTenants(t, api.Config{MaxWaitersPerPrincipal: 2}, w, fakeLister{})
	var wg sync.WaitGroup
	codes := make(chan int, 3)
	for _, tok := range []string{tokenB, tokenB, tokenA} {
		wg.Go(func() {
			prefix := "tenant/b"
			if tok == tokenA {
				prefix = "tenant/a"
			}
			codes <- serveAs(h, tok, "POST", "/v1/kv/"+prefix+"/project/p/q:qpop?wait=20s", "").Code
		})
		<-w.entered
	}
	rec := serveAs(h, tokenB, "POST", "/v1/kv/tenant/b/project/p/q:qpop?wait=20s", "")
	wantRefused(t, "tenant b's third wait", rec, api.SettingMaxWaitersPerPrincipal)
	if rec := serveAs(h, tokenB, "POST", "/v1/kv/tenant/b/project/p/q:qpop", ""); rec.Code != http.StatusOK {
		t.Fatalf("tenant b's pop without wait while its waits are held: %d, want 200", rec.Code)
	}
	close(w.waiting)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a held wait answered %d, want 200", code)
		}
	}
	if n := limited(t, reg, "max_waiters_per_principal"); n != 1 {
		t.Errorf("eskv_http_limited_total{limit=max_waiters_per_principal} = %v, want 1", n)
	}
}
