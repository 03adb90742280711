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

// script is an http.RoundTripper that answers from a list of statuses
// (503 with Retry-After, else 200 with an entry) and records when each
// request came. The retry policy is about time and attempts, not the
// server, so these tests answer in memory under synctest's fake clock.
type script struct {
	mu         sync.Mutex
	statuses   []int
	retryAfter string
	at         []time.Time
}

func (s *script) RoundTrip(r *http.Request) (*http.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	s.at = append(s.at, time.Now())
	status := http.StatusOK
	if n := len(s.at) - 1; n < len(s.statuses) {
		status = s.statuses[n]
	}
	h := http.Header{"Content-Type": {"application/json"}}
	body := `{"key":"tenant/a/project/b/k","value":1,"version":1,"createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z","lastWriter":"dev","semantics":{"purpose":"other"}}`
	if r.Method == http.MethodDelete {
		body = `{"key":"tenant/a/project/b/k","version":2,"deleted":true}`
	}
	if status == http.StatusServiceUnavailable {
		if s.retryAfter != "" {
			h.Set("Retry-After", s.retryAfter)
		}
		body = `{"error":{"code":"partition_unavailable","message":"partition 1 is catching up; retry"}}`
	}
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h,
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

func (s *script) attempts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.at)
}

const key = "tenant/a/project/b/k"

func TestRetry(t *testing.T) {
	unavailable := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = http.StatusServiceUnavailable
		}
		return s
	}
	for _, tc := range []struct {
		name       string
		statuses   []int
		retryAfter string
		timeout    time.Duration
		call       func(context.Context, *client.Client) error
		attempts   int
		code       string
		minElapsed time.Duration
	}{
		{
			name: "OKGetHonoursRetryAfter", statuses: unavailable(1), retryAfter: "3",
			call:     func(ctx context.Context, c *client.Client) error { _, err := c.Get(ctx, key); return err },
			attempts: 2, minElapsed: 3 * time.Second,
		},
		{
			name: "OKListRetried", statuses: unavailable(2),
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.List(ctx, client.ListOptions{Prefix: "tenant/a/project/b/"})
				return err
			},
			attempts: 3, minElapsed: 100 * time.Millisecond,
		},
		{
			name: "ErrGetGivesUpAfterAttempts", statuses: unavailable(10),
			call:     func(ctx context.Context, c *client.Client) error { _, err := c.Get(ctx, key); return err },
			attempts: client.DefaultAttempts, code: contract.EUnavailable,
		},
		{
			name: "ErrPutWithoutRequestIDNotRetried", statuses: unavailable(1),
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`1`)})
				return err
			},
			attempts: 1, code: contract.EUnavailable,
		},
		{
			name: "OKPutWithRequestIDRetried", statuses: unavailable(1), retryAfter: "1",
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`1`), RequestID: "r1"})
				return err
			},
			attempts: 2, minElapsed: time.Second,
		},
		{
			name: "ErrDeleteWithoutRequestIDNotRetried", statuses: unavailable(1),
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Delete(ctx, key, client.DeleteOptions{})
				return err
			},
			attempts: 1, code: contract.EUnavailable,
		},
		{
			name: "OKDeleteWithRequestIDRetried", statuses: unavailable(1),
			call: func(ctx context.Context, c *client.Client) error {
				_, err := c.Delete(ctx, key, client.DeleteOptions{RequestID: "d1"})
				return err
			},
			attempts: 2,
		},
		{
			name: "ErrNoWaitPastDeadline", statuses: unavailable(1), retryAfter: "5", timeout: 2 * time.Second,
			call:     func(ctx context.Context, c *client.Client) error { _, err := c.Get(ctx, key); return err },
			attempts: 1, code: contract.EUnavailable,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := &script{statuses: tc.statuses, retryAfter: tc.retryAfter}
				c := client.New("http://eskv.test", testToken, client.WithHTTPClient(&http.Client{Transport: s}))
				ctx := t.Context()
				if tc.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tc.timeout)
					defer cancel()
				}
				start := time.Now()
				err := tc.call(ctx, c)
				if got := contract.ErrorCode(err); got != tc.code {
					t.Fatalf("want code %q, got %v", tc.code, err)
				}
				if got := s.attempts(); got != tc.attempts {
					t.Fatalf("want %d attempts, got %d", tc.attempts, got)
				}
				if elapsed := time.Since(start); elapsed < tc.minElapsed {
					t.Fatalf("retried after %v, want at least %v", elapsed, tc.minElapsed)
				}
				if tc.code == "" {
					return
				}
				var e *contract.Error
				if tc.retryAfter != "" && (!errors.As(err, &e) || e.RetryAfterSeconds == 0) {
					t.Fatalf("the error should carry Retry-After: %#v", err)
				}
			})
		})
	}
}

func TestBackoffGrowsWithJitterWithinBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &script{statuses: make([]int, 6)}
		for i := range s.statuses {
			s.statuses[i] = http.StatusServiceUnavailable
		}
		c := client.New("http://eskv.test", testToken, client.WithHTTPClient(&http.Client{Transport: s}),
			client.WithRetries(6, 100*time.Millisecond, 400*time.Millisecond))
		if _, err := c.Get(t.Context(), key); contract.ErrorCode(err) != contract.EUnavailable {
			t.Fatalf("want partition_unavailable, got %v", err)
		}
		// Waits: 100, 200, 400, 400, 400 ms ceilings, each jittered into
		// its upper half.
		ceil := []time.Duration{100, 200, 400, 400, 400}
		for i := 1; i < len(s.at); i++ {
			gap, hi := s.at[i].Sub(s.at[i-1]), ceil[i-1]*time.Millisecond
			if gap < hi/2 || gap > hi {
				t.Errorf("wait %d: %v, want within [%v, %v]", i, gap, hi/2, hi)
			}
		}
	})
}
