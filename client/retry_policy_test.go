//go:build go1.25

// These tests run in testing/synctest's bubbles, which came with Go 1.25;
// the client itself needs only the go.mod's version.

package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func TestClassify(t *testing.T) {
	conflict := &contract.Error{Code: contract.EConflict, Field: "expectedVersion"}
	for _, tc := range []struct {
		name string
		err  error
		want client.Class
	}{
		{"TransientNetwork", &client.NetworkError{Method: "GET", URL: "http://x", Err: syscall.ECONNREFUSED}, client.ClassTransient},
		{"TransientAttemptTimeout", &client.NetworkError{Method: "GET", URL: "http://x", Err: context.DeadlineExceeded}, client.ClassTransient},
		{"TransientUnavailable", &contract.Error{Code: contract.EUnavailable}, client.ClassTransient},
		{"TransientOutcomeUnknown", &contract.Error{Code: contract.EOutcomeUnknown, RequestID: "r-1"}, client.ClassTransient},
		{"TransientProxy", fmt.Errorf("%w: %w", client.ErrUnexpectedAnswer, &contract.Error{Code: contract.EUnavailable}), client.ClassTransient},
		{"ConflictVersion", conflict, client.ClassConflict},
		{"ConflictWrapped", fmt.Errorf("put: %w", conflict), client.ClassConflict},
		{"FatalRequestIDReused", &contract.Error{Code: contract.EConflict, Field: "requestId"}, client.ClassFatal},
		{"FatalInvalid", &contract.Error{Code: contract.EInvalid, Field: "key"}, client.ClassFatal},
		{"FatalUnauthenticated", &contract.Error{Code: contract.EUnauthenticated}, client.ClassFatal},
		{"FatalForbidden", &contract.Error{Code: contract.EForbidden}, client.ClassFatal},
		{"FatalNotFound", &contract.Error{Code: contract.ENotFound, Field: "key"}, client.ClassFatal},
		{"FatalTooLarge", &contract.Error{Code: contract.ETooLarge}, client.ClassFatal},
		{"FatalLockHeld", &contract.Error{Code: contract.ELockHeld}, client.ClassFatal},
		{"FatalFieldMismatch", &contract.Error{Code: contract.EFieldMismatch}, client.ClassFatal},
		{"FatalInternal", &contract.Error{Code: contract.EInternal}, client.ClassFatal},
		{"FatalNotEskv", fmt.Errorf("%w: %w", client.ErrUnexpectedAnswer, &contract.Error{Code: contract.EInternal}), client.ClassFatal},
		{"FatalOther", errors.New("decode answer"), client.ClassFatal},
		{"FatalUntrustedCertificate", &client.NetworkError{Method: "GET", URL: "https://x", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, client.ClassFatal},
		{"FatalEscalated", &client.EscalationError{Attempts: 5, Err: &contract.Error{Code: contract.EUnavailable}}, client.ClassFatal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := client.Classify(tc.err); got != tc.want {
				t.Fatalf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// fakeKV is one key held in memory behind an http.RoundTripper: GET
// answers it, PUT compare-and-swaps it. Hooks make a PUT or a GET answer
// something else (a conflict another writer caused, a 503, a broken
// connection), and every request is recorded with its time. The policy is
// about time and attempts, not the server, so these tests run in memory
// under synctest's fake clock.
type fakeKV struct {
	mu      sync.Mutex
	entry   *contract.Entry
	reqs    []fakeReq
	onGet   func(n int) (status int, body string) // n counts GETs from 1; status 0: answer normally
	onPut   func(n int, b contract.PutBody) (status int, body string)
	netErrs int // the first netErrs requests fail without an answer
	gets    int
	puts    int
}

type fakeReq struct {
	at     time.Time
	method string
	body   contract.PutBody
}

func (f *fakeKV) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var b contract.PutBody
	if r.Body != nil {
		raw, _ := io.ReadAll(r.Body)
		r.Body.Close()
		_ = json.Unmarshal(raw, &b)
	}
	f.reqs = append(f.reqs, fakeReq{at: time.Now(), method: r.Method, body: b})
	if len(f.reqs) <= f.netErrs {
		return nil, syscall.ECONNRESET
	}
	rec := httptest.NewRecorder()
	f.serve(rec, r.Method, b)
	res := rec.Result()
	res.Request = r
	return res, nil
}

func (f *fakeKV) serve(w *httptest.ResponseRecorder, method string, b contract.PutBody) {
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if s, ok := v.(string); ok {
			io.WriteString(w, s)
			return
		}
		json.NewEncoder(w).Encode(v)
	}
	switch method {
	case http.MethodGet:
		f.gets++
		if f.onGet != nil {
			if status, body := f.onGet(f.gets); status != 0 {
				answer(status, body)
				return
			}
		}
		if f.entry == nil {
			answer(http.StatusNotFound, `{"error":{"code":"not_found","message":"no such key","field":"key"}}`)
			return
		}
		answer(http.StatusOK, f.entry)
	case http.MethodPut:
		f.puts++
		if f.onPut != nil {
			if status, body := f.onPut(f.puts, b); status != 0 {
				answer(status, body)
				return
			}
		}
		var cur int64
		if f.entry != nil {
			cur = f.entry.Version
		}
		if f.entry != nil && f.entry.RequestID == b.RequestID && b.RequestID != "" {
			w.Header().Set("Eskv-Replayed", "true")
			answer(http.StatusOK, f.entry)
			return
		}
		if b.ExpectedVersion != nil && *b.ExpectedVersion != cur {
			answer(http.StatusConflict, conflictBody(cur))
			return
		}
		f.entry = &contract.Entry{Key: key, Value: b.Value, Version: cur + 1, RequestID: b.RequestID}
		answer(http.StatusOK, f.entry)
	}
}

func conflictBody(current int64) string {
	return fmt.Sprintf(`{"error":{"code":"version_conflict","message":"expected another version","field":"expectedVersion","currentVersion":%d,"currentValue":%d,"correlationId":"c1"}}`, current, current)
}

// times returns when each request of method came.
func (f *fakeKV) times(method string) []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	var at []time.Time
	for _, r := range f.reqs {
		if r.method == method {
			at = append(at, r.at)
		}
	}
	return at
}

func (f *fakeKV) putIDs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for _, r := range f.reqs {
		if r.method == http.MethodPut {
			ids = append(ids, r.body.RequestID)
		}
	}
	return ids
}

func (f *fakeKV) client(opts ...client.Option) *client.Client {
	return client.New("http://eskv.test", testToken, append([]client.Option{client.WithHTTPClient(&http.Client{Transport: f})}, opts...)...)
}

// gaps are the waits between successive times.
func gaps(at []time.Time) []time.Duration {
	var d []time.Duration
	for i := 1; i < len(at); i++ {
		d = append(d, at[i].Sub(at[i-1]))
	}
	return d
}

// addOne is an UpdateFunc that counts: absent is 0.
func addOne(calls *int) client.UpdateFunc {
	return func(cur *contract.Entry) (json.RawMessage, error) {
		*calls++
		var n int
		if cur != nil {
			if err := json.Unmarshal(cur.Value, &n); err != nil {
				return nil, err
			}
		}
		return json.RawMessage(strconv.Itoa(n + 1)), nil
	}
}

// TestUpdateConflictSchedule: another writer wins every round, so Update
// waits 1, 2, 4, 8, 16 and 32 s exactly, reading and writing again after
// each wait, then escalates with its 7 attempts and the last conflict.
func TestUpdateConflictSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKV{entry: &contract.Entry{Key: key, Value: json.RawMessage(`10`), Version: 1}}
		f.onPut = func(int, contract.PutBody) (int, string) {
			f.entry.Version++ // the other writer's write, just before ours
			return http.StatusConflict, conflictBody(f.entry.Version)
		}
		var (
			calls   int
			retried []string
		)
		onRetry := func(err error, attempt int, wait time.Duration) {
			retried = append(retried, fmt.Sprintf("%d:%s:%v", attempt, contract.ErrorCode(err), wait))
		}
		start := time.Now()
		_, err := f.client(client.WithRetryPolicy(client.RetryPolicy{OnRetry: onRetry})).Update(t.Context(), key, addOne(&calls), client.UpdateOptions{RequestID: "sync-1"})
		var esc *client.EscalationError
		if !errors.As(err, &esc) || esc.Attempts != 7 || contract.ErrorCode(err) != contract.EConflict {
			t.Fatalf("want an escalation after 7 attempts carrying the conflict, got %#v", err)
		}
		var last *contract.Error
		if !errors.As(esc.Err, &last) || last.Current == nil || last.Current.Version != 8 {
			t.Fatalf("the escalation should carry the last conflict (current version 8): %#v", esc.Err)
		}
		want := []time.Duration{1, 2, 4, 8, 16, 32}
		for i := range want {
			want[i] *= time.Second
		}
		if got := gaps(f.times(http.MethodGet)); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("waits between attempts %v, want %v", got, want)
		}
		if elapsed := time.Since(start); elapsed != 63*time.Second {
			t.Fatalf("escalated after %v, want 63s", elapsed)
		}
		if calls != 7 {
			t.Fatalf("fn called %d times, want once per attempt (7)", calls)
		}
		if got, want := fmt.Sprint(retried), "[1:version_conflict:1s 2:version_conflict:2s 3:version_conflict:4s 4:version_conflict:8s 5:version_conflict:16s 6:version_conflict:32s]"; got != want {
			t.Fatalf("OnRetry was told %s, want %s", got, want)
		}
		ids := f.putIDs()
		for i, id := range ids {
			if want := fmt.Sprintf("sync-1-%d", i+1); id != want {
				t.Fatalf("attempt %d wrote with requestId %q, want %q (a new request per attempt)", i+1, id, want)
			}
		}
	})
}

func TestUpdate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		entry    *contract.Entry
		policy   client.RetryPolicy
		conflict int // PUTs that lose to another writer first
		check    func(t *testing.T, f *fakeKV, res client.UpdateResult, err error, elapsed time.Duration)
	}{
		{
			name: "OKFirstAttemptCreates",
			check: func(t *testing.T, f *fakeKV, res client.UpdateResult, err error, elapsed time.Duration) {
				if err != nil || res.Attempts != 1 || res.Entry.Version != 1 || string(res.Entry.Value) != "1" || elapsed != 0 {
					t.Fatalf("got %+v, %v after %v", res, err, elapsed)
				}
				if ev := f.reqs[1].body.ExpectedVersion; ev == nil || *ev != 0 {
					t.Fatalf("an absent key is written with expectedVersion 0, got %v", ev)
				}
			},
		},
		{
			name: "OKAfterTwoConflicts", entry: &contract.Entry{Key: key, Value: json.RawMessage(`41`), Version: 3}, conflict: 2,
			check: func(t *testing.T, f *fakeKV, res client.UpdateResult, err error, elapsed time.Duration) {
				// The other writer moved it to version 5 (value 41); ours is 6.
				if err != nil || res.Attempts != 3 || res.Entry.Version != 6 || string(res.Entry.Value) != "42" {
					t.Fatalf("got %+v, %v", res, err)
				}
				if elapsed != 3*time.Second {
					t.Fatalf("took %v, want 1s + 2s", elapsed)
				}
			},
		},
		{
			name: "ErrEscalatesAtCustomCap", entry: &contract.Entry{Key: key, Value: json.RawMessage(`1`), Version: 1}, conflict: 100,
			policy: client.RetryPolicy{ConflictBase: 100 * time.Millisecond, ConflictCap: time.Second},
			check: func(t *testing.T, f *fakeKV, res client.UpdateResult, err error, elapsed time.Duration) {
				var esc *client.EscalationError
				if !errors.As(err, &esc) || esc.Attempts != 6 {
					t.Fatalf("want an escalation after 6 attempts, got %v", err)
				}
				want := "[100ms 200ms 400ms 800ms 1s]"
				if got := fmt.Sprint(gaps(f.times(http.MethodGet))); got != want {
					t.Fatalf("waits %s, want %s (doubling, the last one the cap)", got, want)
				}
			},
		},
		{
			name: "OKConflictJitterWithinBounds", entry: &contract.Entry{Key: key, Value: json.RawMessage(`1`), Version: 1}, conflict: 100,
			policy: client.RetryPolicy{ConflictJitter: true},
			check: func(t *testing.T, f *fakeKV, res client.UpdateResult, err error, elapsed time.Duration) {
				var esc *client.EscalationError
				if !errors.As(err, &esc) || esc.Attempts != 7 {
					t.Fatalf("want an escalation after 7 attempts, got %v", err)
				}
				for i, gap := range gaps(f.times(http.MethodGet)) {
					hi := time.Second << i
					if gap < hi/2 || gap > hi {
						t.Errorf("wait %d: %v, want within [%v, %v]", i+1, gap, hi/2, hi)
					}
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeKV{entry: tc.entry}
				f.onPut = func(n int, _ contract.PutBody) (int, string) {
					if n > tc.conflict {
						return 0, ""
					}
					f.entry.Version++
					return http.StatusConflict, conflictBody(f.entry.Version)
				}
				var calls int
				start := time.Now()
				res, err := f.client(client.WithRetryPolicy(tc.policy)).Update(t.Context(), key, addOne(&calls), client.UpdateOptions{})
				tc.check(t, f, res, err, time.Since(start))
			})
		})
	}
}

// TestUpdateRequestIDs: a transient retry of an attempt repeats its
// requestId, and is answered as a replay when the first try was applied
// but its answer lost; an attempt after a conflict is a new request.
func TestUpdateRequestIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKV{entry: &contract.Entry{Key: key, Value: json.RawMessage(`1`), Version: 1}}
		f.onPut = func(n int, b contract.PutBody) (int, string) {
			switch n {
			case 1:
				f.entry.Version++
				return http.StatusConflict, conflictBody(f.entry.Version)
			case 2: // applied, but the answer is lost
				f.entry = &contract.Entry{Key: key, Value: b.Value, Version: f.entry.Version + 1, RequestID: b.RequestID}
				return http.StatusServiceUnavailable, `{"error":{"code":"partition_unavailable","message":"outcome unknown; retry"}}`
			}
			return 0, ""
		}
		var calls int
		res, err := f.client().Update(t.Context(), key, addOne(&calls), client.UpdateOptions{RequestID: "job-7"})
		if err != nil || !res.Replayed || res.Attempts != 2 || res.Entry.Version != 3 || string(res.Entry.Value) != "2" {
			t.Fatalf("got %+v, %v", res, err)
		}
		if ids := fmt.Sprint(f.putIDs()); ids != "[job-7-1 job-7-2 job-7-2]" {
			t.Fatalf("requestIds %s, want [job-7-1 job-7-2 job-7-2]", ids)
		}
		if calls != 2 {
			t.Fatalf("fn called %d times, want 2 (a transient retry does not call it again)", calls)
		}

		// Running the same update again finds it applied: no new write.
		res, err = f.client().Update(t.Context(), key, addOne(&calls), client.UpdateOptions{RequestID: "job-7"})
		if err != nil || !res.Replayed || res.Entry.Version != 3 || len(f.putIDs()) != 3 || calls != 2 {
			t.Fatalf("rerun: %+v, %v; %d PUTs, fn called %d times", res, err, len(f.putIDs()), calls)
		}
	})
}

// TestUpdateOutcomeUnknown: a write applied whose answer was lost, then
// superseded by another writer before the retry, is not applied again:
// Update escalates with ErrOutcomeUnknown, fn having run once.
func TestUpdateOutcomeUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKV{entry: &contract.Entry{Key: key, Value: json.RawMessage(`1`), Version: 1}}
		f.onPut = func(n int, b contract.PutBody) (int, string) {
			if n == 1 { // applied, then another writer's write, then the answer is lost
				f.entry = &contract.Entry{Key: key, Value: json.RawMessage(`7`), Version: 3, RequestID: "other"}
				return http.StatusServiceUnavailable, `{"error":{"code":"partition_unavailable","message":"outcome unknown; retry"}}`
			}
			return 0, ""
		}
		var calls int
		_, err := f.client().Update(t.Context(), key, addOne(&calls), client.UpdateOptions{})
		var esc *client.EscalationError
		if !errors.As(err, &esc) || !errors.Is(err, client.ErrOutcomeUnknown) || contract.ErrorCode(err) != contract.EConflict || esc.Attempts != 1 {
			t.Fatalf("want an escalation with ErrOutcomeUnknown after 1 attempt, got %v", err)
		}
		if calls != 1 || len(f.putIDs()) != 2 || string(f.entry.Value) != "7" {
			t.Fatalf("fn ran %d times, %d PUTs, value %s: the change must not be applied again", calls, len(f.putIDs()), f.entry.Value)
		}
	})
}

// TestTransientEscalates: 503s, a proxy's 429 and broken connections are
// tried 5 times in all, with waits of 100, 200, 400 and 800 ms each
// jittered into its upper half, then escalate with the attempts.
func TestTransientEscalates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		netErr bool
		code   string
	}{
		{name: "Unavailable", status: http.StatusServiceUnavailable, body: `{"error":{"code":"partition_unavailable","message":"catching up"}}`, code: contract.EUnavailable},
		{name: "ProxyTooManyRequests", status: http.StatusTooManyRequests, body: `<html>slow down</html>`, code: contract.EUnavailable},
		{name: "ProxyBadGateway", status: http.StatusBadGateway, body: ``, code: contract.EUnavailable},
		{name: "ConnectionReset", netErr: true, code: contract.EInternal},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeKV{onGet: func(int) (int, string) { return tc.status, tc.body }}
				if tc.netErr {
					f.netErrs = 100
				}
				_, err := f.client().Get(t.Context(), key)
				var esc *client.EscalationError
				if !errors.As(err, &esc) || esc.Attempts != 5 || contract.ErrorCode(err) != tc.code {
					t.Fatalf("want an escalation after 5 attempts with code %s, got %#v", tc.code, err)
				}
				var ne *client.NetworkError
				if tc.netErr != errors.As(err, &ne) {
					t.Fatalf("the escalation should carry the last error as is: %v", err)
				}
				at := f.times(http.MethodGet)
				if len(at) != 5 {
					t.Fatalf("%d attempts, want 5", len(at))
				}
				for i, gap := range gaps(at) {
					hi := client.DefaultMinWait << i
					if gap < hi/2 || gap > hi {
						t.Errorf("wait %d: %v, want within [%v, %v]", i+1, gap, hi/2, hi)
					}
				}
			})
		})
	}
}

// hangingTransport never answers: each request waits for its context to
// end, and counts in tries.
func hangingTransport(tries *int) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		*tries++
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
}

// TestAttemptTimeout: a server that never answers costs AttemptTimeout per
// try, and the tries are transient.
func TestAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tries int
		hang := hangingTransport(&tries)
		c := client.New("http://eskv.test", testToken, client.WithHTTPClient(&http.Client{Transport: hang}),
			client.WithRetryPolicy(client.RetryPolicy{Attempts: 3, AttemptTimeout: time.Second}))
		start := time.Now()
		_, err := c.Get(t.Context(), key)
		var esc *client.EscalationError
		if !errors.As(err, &esc) || esc.Attempts != 3 || tries != 3 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("want 3 timed-out tries escalated, got %d tries: %v", tries, err)
		}
		if elapsed := time.Since(start); elapsed < 3*time.Second || elapsed > 3*time.Second+300*time.Millisecond {
			t.Fatalf("took %v, want 3 timeouts of 1s and two waits of at most 100 and 200 ms", elapsed)
		}
	})
}

// TestDefaultAttemptTimeout: a client built without a policy bounds each
// try by DefaultAttemptTimeout, so a try whose answer never comes is
// retried within the caller's deadline instead of taking all of it.
func TestDefaultAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tries int
		hang := hangingTransport(&tries)
		c := client.New("http://eskv.test", testToken, client.WithHTTPClient(&http.Client{Transport: hang}))
		ctx, cancel := context.WithTimeout(t.Context(), 25*time.Second)
		defer cancel()
		start := time.Now()
		_, err := c.Get(ctx, key)
		if tries != 3 || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("%d tries in 25s, then %v; want 3 (two timed out after %v each)", tries, err, client.DefaultAttemptTimeout)
		}
		t.Logf("3 tries within the caller's 25s (each bounded by %v), returned after %v", client.DefaultAttemptTimeout, time.Since(start))
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFatalNotRetried: fatal answers end a call and an Update at once,
// with the answer itself (not an escalation).
func TestFatalNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name, code string
		status     int
		body       string
		onPut      bool // the PUT answers it (else the GET)
	}{
		{"Invalid", contract.EInvalid, 400, `{"error":{"code":"invalid","message":"bad key","field":"key"}}`, false},
		{"Unauthenticated", contract.EUnauthenticated, 401, `{"error":{"code":"unauthenticated","message":"no token"}}`, false},
		{"Forbidden", contract.EForbidden, 403, `{"error":{"code":"forbidden","message":"not yours"}}`, false},
		{"TooLarge", contract.ETooLarge, 413, `{"error":{"code":"value_too_large","message":"too big","field":"value"}}`, true},
		{"RequestIDReused", contract.EConflict, 409, `{"error":{"code":"version_conflict","message":"requestId reused","field":"requestId","currentVersion":2}}`, true},
		{"WrongType", contract.EWrongType, 409, `{"error":{"code":"wrong_type","message":"a lock","currentVersion":2}}`, true},
		{"Internal", contract.EInternal, 500, `{"error":{"code":"internal","message":"internal error"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeKV{entry: &contract.Entry{Key: key, Value: json.RawMessage(`1`), Version: 1}}
				answer := func(int) (int, string) { return tc.status, tc.body }
				if tc.onPut {
					f.onPut = func(int, contract.PutBody) (int, string) { return answer(0) }
				} else {
					f.onGet = answer
				}
				var calls int
				start := time.Now()
				_, err := f.client().Update(t.Context(), key, addOne(&calls), client.UpdateOptions{})
				var esc *client.EscalationError
				if contract.ErrorCode(err) != tc.code || errors.As(err, &esc) {
					t.Fatalf("want %s as is, got %#v", tc.code, err)
				}
				if n := len(f.reqs); (tc.onPut && n != 2) || (!tc.onPut && n != 1) || time.Since(start) != 0 {
					t.Fatalf("%d requests after %v: want one try, no wait", n, time.Since(start))
				}
			})
		})
	}
}

func TestUpdateFuncErrorWritesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKV{entry: &contract.Entry{Key: key, Value: json.RawMessage(`1`), Version: 1}}
		stop := errors.New("nothing to do")
		// fn's error is returned as is, even one that looks like a conflict.
		for _, want := range []error{stop, &contract.Error{Code: contract.EConflict, Field: "expectedVersion"}} {
			_, err := f.client().Update(t.Context(), key, func(*contract.Entry) (json.RawMessage, error) { return nil, want }, client.UpdateOptions{})
			if err != want {
				t.Fatalf("want fn's error, got %v", err)
			}
		}
		if len(f.putIDs()) != 0 {
			t.Fatal("an UpdateFunc error must write nothing")
		}
		long, sent := strings.Repeat("r", 121), len(f.reqs)
		if _, err := f.client().Update(t.Context(), key, addOne(new(int)), client.UpdateOptions{RequestID: long}); contract.ErrorCode(err) != contract.EInvalid || len(f.reqs) != sent {
			t.Fatalf("a requestId without room for -N: want invalid before any request, got %v", err)
		}
	})
}

// TestUpdateDeadLetterPushFails: an update that escalates pushes its
// dead letter once, with its last write's requestId, to the queue it
// names; when that push fails (here the answer is not eskv's), the error
// holds both the escalation, which names no queue, and the push's error.
func TestUpdateDeadLetterPushFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeKV{entry: &contract.Entry{Key: key, Value: json.RawMessage(`10`), Version: 1}}
		f.onPut = func(int, contract.PutBody) (int, string) {
			f.entry.Version++
			return http.StatusConflict, conflictBody(f.entry.Version)
		}
		var calls int
		_, err := f.client(client.WithRetries(1, time.Millisecond, time.Millisecond)).Update(t.Context(), key, addOne(&calls),
			client.UpdateOptions{RequestID: "sync-1", DeadLetter: "tenant/acme/project/demo/triage"})
		var esc *client.EscalationError
		if !errors.As(err, &esc) || esc.Attempts != 7 || esc.DeadLetter != "" || !strings.Contains(err.Error(), "dead-letter the update of "+key) {
			t.Fatalf("want the escalation joined with the failed push, got %v", err)
		}
		var pushes []string
		for _, r := range f.reqs {
			if r.method == http.MethodPost {
				pushes = append(pushes, r.body.RequestID)
			}
		}
		if len(pushes) != 1 || pushes[0] != "sync-1-7" {
			t.Fatalf("pushes with requestIds %v, want one with sync-1-7", pushes)
		}
	})
}
