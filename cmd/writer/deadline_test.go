package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/testenv"
)

// The bounds the deadline tests hold the writer to: its request deadline
// (ESKV_REQUEST_TIMEOUT) and the slack an answer may take beyond it; how
// soon /readyz must fail, and how soon after the dependency answers again
// a request must succeed.
const (
	testRequestTimeout = time.Second
	answerSlack        = 500 * time.Millisecond
	unreadyWithin      = 2 * time.Second
	recoverWithin      = 5 * time.Second
)

// startDeadlineWriter runs the writer in-process on b and a database of
// its own with a request deadline of testRequestTimeout, and waits until
// it is ready.
func startDeadlineWriter(t *testing.T, b *testenv.Broker) (string, *testenv.Postgres) {
	t.Helper()
	base, _, pg := startWriter(t, b, map[string]string{"ESKV_WRITER_ID": "deadline-test", "ESKV_LOG_LEVEL": "error",
		"ESKV_REQUEST_TIMEOUT": testRequestTimeout.String()})
	return base, pg
}

// answer is what one request got, and how long it took.
type answer struct {
	status     int
	err        contract.ErrorDetail
	retryAfter string
	replayed   bool
	version    int64
	took       time.Duration
}

func send(t *testing.T, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer dev-token-for-main-test")
	start := time.Now()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: no answer after %v: %v", method, url, time.Since(start), err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), replayed: resp.Header.Get("Eskv-Replayed") == "true",
		took: time.Since(start)}
	var e contract.ErrorBody
	if json.Unmarshal(b, &e) == nil {
		a.err = e.Error
	}
	var entry struct{ Version int64 }
	if json.Unmarshal(b, &entry) == nil {
		a.version = entry.Version
	}
	return a
}

// wantUnavailable checks a 503 of code with Retry-After, answered within
// the deadline and its slack.
func wantUnavailable(t *testing.T, what string, a answer, code string) {
	t.Helper()
	t.Logf("%s: %d %s in %v", what, a.status, a.err.Code, a.took.Round(time.Millisecond))
	if a.status != http.StatusServiceUnavailable || a.err.Code != code || a.retryAfter == "" || a.took > testRequestTimeout+answerSlack {
		t.Fatalf("%s: %d %+v (Retry-After %q) after %v; want 503 %s with Retry-After within %v", what, a.status, a.err, a.retryAfter, a.took,
			code, testRequestTimeout+answerSlack)
	}
}

// unready polls /readyz from start until it fails; the channel gets how
// long after start it did (or a value past within when it did not).
func unready(base string, start time.Time, within time.Duration) <-chan time.Duration {
	out := make(chan time.Duration, 1)
	go func() {
		c := &http.Client{Timeout: 3 * time.Second}
		for time.Since(start) < within+time.Second {
			resp, err := c.Get(base + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					out <- time.Since(start)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		out <- within + time.Second
	}()
	return out
}

// TestBrokerPaused: while the broker answers nothing, a write is
// answered 503 outcome_unknown naming its requestId within the request
// deadline, a read 503 partition_unavailable, and /readyz fails within
// 2 s; once the broker answers again, the write's retry with the same
// requestId succeeds within 5 s, applied once, and the writer is ready.
func TestBrokerPaused(t *testing.T) {
	b := testenv.MustBroker(t, 2)
	base, _ := startDeadlineWriter(t, b)
	key := base + "/v1/kv/tenant/a/project/b/paused"
	if a := send(t, "PUT", key, `{"value":1}`); a.status != http.StatusOK || a.version != 1 {
		t.Fatalf("put before the pause: %+v", a)
	}

	resume := b.Pause(t)
	paused := time.Now()
	readyz := unready(base, paused, unreadyWithin)
	const write = `{"value":2,"requestId":"paused-1"}`
	a := send(t, "PUT", key, write)
	wantUnavailable(t, "PUT while paused", a, contract.EOutcomeUnknown)
	if a.err.RequestID != "paused-1" {
		t.Fatalf("outcome_unknown names requestId %q; want paused-1", a.err.RequestID)
	}
	wantUnavailable(t, "GET while paused", send(t, "GET", key, ""), contract.EUnavailable)
	took := <-readyz
	t.Logf("/readyz failed %v after the pause", took.Round(time.Millisecond))
	if took > unreadyWithin {
		t.Fatalf("/readyz still ready %v after the pause; want unready within %v", took, unreadyWithin)
	}

	resume()
	resumed := time.Now()
	for {
		a = send(t, "PUT", key, write)
		if a.status == http.StatusOK {
			break
		}
		if time.Since(resumed) > recoverWithin {
			t.Fatalf("%v after the broker answers again, the write is still refused: %+v", time.Since(resumed), a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("first successful write %v after the resume (version %d, replayed %v)", time.Since(resumed).Round(time.Millisecond), a.version, a.replayed)
	if a.version != 2 {
		t.Fatalf("the retried write is version %d; want 2 (applied once)", a.version)
	}
	if g := send(t, "GET", key, ""); g.status != http.StatusOK || g.version != 2 {
		t.Fatalf("get after the retry: %+v; want version 2", g)
	}
	servicetest.WaitReady(t, base)
	t.Logf("/readyz ready again %v after the resume", time.Since(resumed).Round(time.Millisecond))
}

// TestProjectionLocked: while a lock held on the projection's table of
// entries stalls every read of it (Postgres itself answers: SELECT 1
// does), a read that needs it is answered 503 partition_unavailable
// within the request deadline, and /readyz fails within 2 s; once the
// lock is released the read is answered and the writer is ready.
func TestProjectionLocked(t *testing.T) {
	base, pg := startDeadlineWriter(t, testenv.MustBroker(t, 2))
	key := base + "/v1/kv/tenant/a/project/b/never-written"

	release := pg.Lock(t, "kv_entries")
	locked := time.Now()
	readyz := unready(base, locked, unreadyWithin)
	wantUnavailable(t, "GET while locked", send(t, "GET", key, ""), contract.EUnavailable)
	took := <-readyz
	t.Logf("/readyz failed %v after the lock", took.Round(time.Millisecond))
	if took > unreadyWithin {
		t.Fatalf("/readyz still ready %v after the lock; want unready within %v", took, unreadyWithin)
	}
	if err := pg.Pool.Ping(t.Context()); err != nil {
		t.Fatalf("ping while locked: %v (the test needs Postgres answering)", err)
	}

	release()
	released := time.Now()
	for {
		a := send(t, "GET", key, "")
		if a.status == http.StatusNotFound {
			break
		}
		if time.Since(released) > recoverWithin {
			t.Fatalf("%v after the lock was released, the read is still refused: %+v", time.Since(released), a)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("first read answered %v after the release", time.Since(released).Round(time.Millisecond))
	servicetest.WaitReady(t, base)
	t.Logf("/readyz ready again %v after the release", time.Since(released).Round(time.Millisecond))
}
