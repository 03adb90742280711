package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// watchResume: a watch of the prefix (listed first, watched from the
// listing's position) sees k1; a writer is killed; k2..k5 are put
// through the fail-over; the same watch delivers them once each, in
// order.
func watchResume(ctx context.Context, r *runner) error {
	page, err := r.c.List(ctx, client.ListOptions{Prefix: r.prefix})
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	events := make(chan contract.WatchEvent, 16)
	ended := make(chan error, 1)
	go func() {
		for ev, err := range r.c.Watch(wctx, client.WatchOptions{Prefix: r.prefix, After: page.Position}) {
			if err != nil {
				ended <- err
				return
			}
			events <- ev
		}
		ended <- nil
	}()
	check("watching %s after the listing's position %q", r.prefix, page.Position)
	if err := r.putNext(ctx, "k1"); err != nil {
		return err
	}
	first, err := next(ctx, events, ended)
	if err != nil || first.Key != r.key("k1") {
		return failf("the watch's first event is %s (%v), want k1", first.Key, err)
	}
	check("received k1 (version %d, cursor %s)", first.Version, first.Cursor)
	if err := r.post(ctx, "/kill-writer", nil); err != nil {
		return err
	}
	check("killed the writer behind the proxy")
	start := time.Now()
	for _, name := range []string{"k2", "k3", "k4", "k5"} {
		if err := r.putNext(ctx, name); err != nil {
			return err
		}
	}
	check("put k2..k5 through the fail-over in %s (%d retried errors)", time.Since(start).Round(time.Millisecond), r.retries.Load())
	last := first
	for _, name := range []string{"k2", "k3", "k4", "k5"} {
		ev, err := next(ctx, events, ended)
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", name, err)
		}
		if ev.Key != r.key(name) || !after(ev.Cursor, last.Cursor) {
			return failf("after %s (cursor %s) the watch delivered %s (cursor %s), want %s after it", last.Key, last.Cursor, ev.Key, ev.Cursor, name)
		}
		last = ev
	}
	if r.reconnects.Load() < 1 {
		return failf("the watch was not cut by the kill: nothing resumed")
	}
	check("the same watch resumed by itself (%d reconnections) and delivered k2..k5 once each, in order, cursors increasing to %s",
		r.reconnects.Load(), last.Cursor)
	stop()
	select {
	case ev := <-events:
		return failf("an extra event after k5: %s", ev.Key)
	case <-time.After(500 * time.Millisecond):
	}
	check("no duplicate after k5; watch stopped")
	return nil
}

// putNext puts {"name": name} at name with a requestId, so the client
// retries it through a fail-over.
func (r *runner) putNext(ctx context.Context, name string) error {
	id := fmt.Sprintf("conformance-%s-%d", name, time.Now().UnixNano())
	_, err := r.c.Put(ctx, client.PutRequest{Key: r.key(name), Value: json.RawMessage(fmt.Sprintf(`{"name":%q}`, name)), RequestID: id})
	if err != nil {
		return fmt.Errorf("put %s: %w", name, err)
	}
	return nil
}

// next is the watch's next event, within 30 s.
func next(ctx context.Context, events <-chan contract.WatchEvent, ended <-chan error) (contract.WatchEvent, error) {
	select {
	case ev := <-events:
		return ev, nil
	case err := <-ended:
		return contract.WatchEvent{}, fmt.Errorf("the watch ended: %v", err)
	case <-time.After(30 * time.Second):
		return contract.WatchEvent{}, errors.New("no event within 30 s")
	case <-ctx.Done():
		return contract.WatchEvent{}, ctx.Err()
	}
}

// after reports whether cursor b precedes a in one partition's log
// (cursors are p<partition>.o<offset>).
func after(a, b string) bool {
	pa, oa, okA := splitCursor(a)
	pb, ob, okB := splitCursor(b)
	return okA && okB && pa == pb && oa > ob
}

func splitCursor(c string) (string, int64, bool) {
	p, o, ok := strings.Cut(c, ".o")
	if !ok {
		return "", 0, false
	}
	n, err := strconv.ParseInt(o, 10, 64)
	return p, n, err == nil
}

// lockKeepaliveLoss: KeepLock keeps a 2 s lock past twice its TTL; an
// operator's delete of the lock is reported by Done and ErrLeaseLost.
func lockKeepaliveLoss(ctx context.Context, r *runner) error {
	const ttl = 2 * time.Second
	k := r.key("lock")
	lease, err := r.c.KeepLock(ctx, client.LockRequest{Key: k, Holder: "gorunner-a", TTL: ttl})
	if err != nil {
		return fmt.Errorf("KeepLock: %w", err)
	}
	defer lease.Release(context.WithoutCancel(ctx))
	check("KeepLock took %s with TTL %s (token %d)", k, ttl, lease.Token())
	time.Sleep(5 * time.Second)
	if err := lease.Err(); err != nil {
		return failf("the lease ended within 5 s: %v", err)
	}
	_, err = r.c.AcquireLock(ctx, client.LockRequest{Key: k, Holder: "gorunner-b", TTL: ttl})
	if _, ok := typed(err, contract.ELockHeld); !ok {
		return failf("another holder's acquire after 5 s: %v, want the typed lock_held", err)
	}
	check("after 5 s the lock is still held: another holder's acquire is the typed lock_held")
	broken, err := r.breakLock(ctx, k)
	if err != nil {
		return err
	}
	check("broke the lock as an operator (DELETE expectedVersion=%d)", broken)
	select {
	case <-lease.Done():
	case <-time.After(2 * ttl):
		return failf("the keep-alive did not report the loss within %s", 2*ttl)
	}
	if !errors.Is(lease.Err(), client.ErrLeaseLost) {
		return failf("the lease ended with %v, want ErrLeaseLost", lease.Err())
	}
	check("Lease.Done() closed with ErrLeaseLost: %v", lease.Err())
	return nil
}

// breakLock deletes the lock at k at its current version (read by GET),
// reading again when a renewal moved it in between.
func (r *runner) breakLock(ctx context.Context, k string) (int64, error) {
	for range 10 {
		cur, err := r.c.Get(ctx, k)
		if err != nil {
			return 0, fmt.Errorf("get the lock: %w", err)
		}
		_, err = r.c.Delete(ctx, k, client.DeleteOptions{ExpectedVersion: &cur.Version})
		if err == nil {
			return cur.Version, nil
		}
		if _, ok := typed(err, contract.EConflict); !ok {
			return 0, fmt.Errorf("delete the lock: %w", err)
		}
	}
	return 0, errors.New("the lock's version moved under 10 deletes in a row")
}
