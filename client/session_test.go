//go:build go1.25

package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// fakeSessions answers :session, :keepalive and :revoke of one session
// from memory on synctest's fake clock: 200 while it is up, 503 while
// down, 404 once gone.
type fakeSessions struct {
	mu         sync.Mutex
	down, gone bool
	keepalives []time.Time
	revoked    bool
}

func (f *fakeSessions) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	status, body := http.StatusOK, `{"key":"tenant/a/project/b/s","version":1,"ttlSeconds":3,"attached":[]}`
	switch {
	case f.down:
		status, body = http.StatusServiceUnavailable, `{"error":{"code":"partition_unavailable","message":"down"}}`
	case f.gone:
		status, body = http.StatusNotFound, `{"error":{"code":"not_found","message":"session ended"}}`
	case strings.HasSuffix(r.URL.Path, ":keepalive"):
		f.keepalives = append(f.keepalives, time.Now())
	case strings.HasSuffix(r.URL.Path, ":revoke"):
		f.revoked = true
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// seen returns the keep-alives so far and whether a revoke came.
func (f *fakeSessions) seen() (keepalives []time.Time, revoked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.keepalives), f.revoked
}

func revokedOf(f *fakeSessions) bool { _, r := f.seen(); return r }

func (f *fakeSessions) set(down, gone bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.gone = down, gone
}

// TestSession: a Session renews every third of its TTL and is kept over
// many TTLs; Close revokes it; a session the server ended, or one no
// renewal reaches within its TTL, is lost (Done closes, Err matches
// ErrLeaseLost) and not revoked.
func TestSession(t *testing.T) {
	const ttl = 3 * time.Second
	start := func(t *testing.T, f *fakeSessions) *client.Session {
		t.Helper()
		c := client.New("http://eskv.test", testToken, client.WithHTTPClient(&http.Client{Transport: f}))
		s, err := client.NewSession(t.Context(), c, "tenant/a/project/b/s", ttl)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("OKKeptAndClosed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeSessions{}
			s := start(t, f)
			time.Sleep(10 * ttl)
			select {
			case <-s.Done():
				t.Fatalf("lost: %v", s.Err())
			default:
			}
			if ka, _ := f.seen(); len(ka) < 29 || len(ka) > 31 {
				t.Fatalf("%d keep-alives in 10 TTLs, want 30 (every TTL/3)", len(ka))
			}
			if err := s.Close(context.Background()); err != nil || !revokedOf(f) || !errors.Is(s.Err(), client.ErrSessionClosed) {
				t.Fatalf("Close: %v, revoked %v, Err %v", err, revokedOf(f), s.Err())
			}
		})
	})
	t.Run("ErrEndedByTheServer", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeSessions{}
			s := start(t, f)
			f.set(false, true)
			<-s.Done()
			var lost *client.LostError
			if !errors.As(s.Err(), &lost) || !errors.Is(s.Err(), client.ErrLeaseLost) || contract.ErrorCode(lost.Err) != contract.ENotFound {
				t.Fatalf("Err %v, want a LostError of not_found", s.Err())
			}
			if err := s.Close(context.Background()); err != nil || revokedOf(f) {
				t.Fatalf("Close of a lost session: %v, revoked %v", err, revokedOf(f))
			}
		})
	})
	t.Run("ErrUnreachable", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeSessions{}
			s := start(t, f)
			time.Sleep(ttl / 2)
			f.set(true, false)
			down := time.Now()
			<-s.Done()
			var lost *client.LostError
			if !errors.As(s.Err(), &lost) || !lost.Unconfirmed {
				t.Fatalf("Err %v, want an unconfirmed LostError", s.Err())
			}
			if d := time.Since(down); d > ttl {
				t.Fatalf("lost %v after the server went down, want within the TTL %v of the last renewal", d, ttl)
			}
		})
	})
}
