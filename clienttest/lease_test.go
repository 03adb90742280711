package clienttest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

func isDone(l *client.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// flaky is a transport that can be cut off: a network partition
// between one client and the stack.
type flaky struct{ cut atomic.Bool }

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.cut.Load() {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, fmt.Errorf("partitioned")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestKeepLockStack keeps a lease against the real writer.
func TestKeepLockStack(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	ctx := t.Context()
	other := client.New(url, stack.DevToken)
	const ttl = 3 * time.Second
	held := func(t *testing.T, key string) {
		t.Helper()
		if _, err := other.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "other", TTL: ttl}); contract.ErrorCode(err) != contract.ELockHeld {
			t.Fatalf("another holder's acquire: want lock_held, got %v", err)
		}
	}

	t.Run("RenewsPastSeveralTTLsThenReleases", func(t *testing.T) {
		key := "tenant/acme/project/lease/locks/renew"
		l := mustKeepKey(t, client.New(url, stack.DevToken), key, ttl)
		for range 4 {
			time.Sleep(ttl * 3 / 4)
			held(t, key)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := other.CheckLock(ctx, key); contract.ErrorCode(err) != contract.ENotFound || !isDone(l) {
			t.Fatalf("after Release: check %v, done %v", err, isDone(l))
		}
	})

	t.Run("LostAfterPartitionAndTakeOver", func(t *testing.T) {
		key := "tenant/acme/project/lease/locks/lost"
		tr := &flaky{}
		l := mustKeepKey(t, client.New(url, stack.DevToken, client.WithHTTPClient(&http.Client{Transport: tr})), key, ttl)
		held(t, key)
		tr.cut.Store(true)
		select {
		case <-l.Done():
		case <-time.After(ttl):
			t.Fatal("Done did not close within the TTL of the partition")
		}
		var lost *client.LostError
		if !errors.As(l.Err(), &lost) || !lost.Unconfirmed {
			t.Fatalf("Err after the partition: %v", l.Err())
		}
		stack.WaitFor(t, "another holder to take the lock after the lease", func() bool {
			_, err := other.AcquireLock(ctx, client.LockRequest{Key: key, Holder: "other", TTL: time.Minute})
			return err == nil
		})
		tr.cut.Store(false)
		if err := l.Release(ctx); contract.ErrorCode(err) != contract.ENotLockHolder {
			t.Fatalf("Release after another took over: %v", err)
		}
		if got, err := other.CheckLock(ctx, key); err != nil || got.Holder != "other" {
			t.Fatalf("the other holder lost its lock: %+v, %v", got, err)
		}
	})
}

func mustKeepKey(t *testing.T, c *client.Client, key string, ttl time.Duration) *client.Lease {
	t.Helper()
	l, err := c.KeepLock(t.Context(), client.LockRequest{Key: key, Holder: "me", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}
