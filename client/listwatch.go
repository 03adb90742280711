package client

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/eskv/eskv/contract"
)

// ListWatchOptions select the prefix ListWatch keeps.
type ListWatchOptions struct {
	// Prefix must start with tenant/<t>/project/<p>/.
	Prefix string
	// PageSize is the listing's page size, 1..1000; 0 means the
	// server's default (100).
	PageSize int
}

// ChangeType says what a Change carries.
type ChangeType string

const (
	// ChangeSnapshot: Snapshot holds every live entry of the prefix at
	// Position, all the pages of one listing. The cache becomes exactly
	// it (drop what it held before: Relist says it held something).
	ChangeSnapshot ChangeType = "snapshot"
	// ChangeEvent: Event is the next change of the prefix after the
	// snapshot and the events before it (a put sets Event.Key's entry,
	// a delete or an expiry removes it).
	ChangeEvent ChangeType = "event"
)

// Change is one step of ListWatch: a snapshot, or an event after it.
type Change struct {
	Type ChangeType
	// Position is where the cache stands once the change is applied:
	// the snapshot's position or the event's cursor.
	Position string
	// Snapshot is the listing (ChangeSnapshot), in key order.
	Snapshot []contract.Entry
	// Relist marks a snapshot that replaces an earlier one: the watch
	// ended with cursor_expired, so the events between the last one
	// yielded and the new snapshot's position are lost; rebuild the
	// cache from Snapshot.
	Relist bool
	// Event is the change (ChangeEvent).
	Event contract.WatchEvent
}

// ErrNoPosition is the error of a listing answered without a position
// (a server older than positions): a watch from it could not be exact.
var ErrNoPosition = errors.New("the listing carries no position")

// ListWatch keeps a consumer of o.Prefix in step with it, the loop of
// Kubernetes' reflector or of etcd's watch WithRev: it lists the prefix
// (every page of one listing: one snapshot at one position) and yields
// it as a ChangeSnapshot, then watches the prefix after that position
// and yields each change as a ChangeEvent. Applied in order they keep a
// cache equal to the prefix as of the last Position: the listing holds
// every event up to its position and none after, and the watch delivers
// exactly the events after it, no gap, no duplicate.
//
// Watch resumes by itself after disconnects, writer kills, partition
// moves and slow_consumer, after the last cursor it saw. When the log no
// longer holds what follows it (cursor_expired), ListWatch lists again
// and yields a snapshot with Relist set. A listing whose snapshot the
// server no longer holds (snapshot_expired) is started again from its
// first page; nothing of it was yielded. Transient listing errors are
// retried with the client's policy's waits (Retry-After at least),
// without end. A fatal error (400, 403, a listing without a position)
// ends it with (zero Change, err). It ends without an error when ctx
// ends or the loop breaks, and leaves no goroutine behind: everything
// runs in the caller's loop.
func (c *Client) ListWatch(ctx context.Context, o ListWatchOptions) iter.Seq2[Change, error] {
	return func(yield func(Change, error) bool) {
		relist := false
		for ctx.Err() == nil {
			snap, err := c.snapshot(ctx, o)
			if err != nil {
				if ctx.Err() == nil {
					yield(Change{}, err)
				}
				return
			}
			snap.Relist = relist
			if !yield(snap, nil) {
				return
			}
			more, err := c.watchAfter(ctx, o.Prefix, snap.Position, yield)
			if !more {
				return
			}
			if err != nil {
				yield(Change{}, err)
				return
			}
			relist = true
		}
	}
}

// watchAfter yields the changes of prefix after position until the
// watch ends. It returns false when ListWatch is over (the caller's
// loop broke or ctx ended); true with a nil error when the cursor
// expired (list again); true with an error when the watch ended fatally.
func (c *Client) watchAfter(ctx context.Context, prefix, position string, yield func(Change, error) bool) (bool, error) {
	for ev, err := range c.Watch(ctx, WatchOptions{Prefix: prefix, After: position}) {
		if err != nil {
			if contract.ErrorCode(err) == contract.ECursorExpired {
				return true, nil
			}
			return true, err
		}
		if !yield(Change{Type: ChangeEvent, Position: ev.Cursor, Event: ev}, nil) {
			return false, nil
		}
	}
	return false, nil // Watch ends without an error only when ctx ended
}

// snapshot lists every page of o.Prefix as one snapshot, starting again
// when a later page's snapshot expired and retrying transient errors
// with the policy's waits until ctx ends.
func (c *Client) snapshot(ctx context.Context, o ListWatchOptions) (Change, error) {
	waits := c.policy.waits()
	for {
		snap, err := c.listOnce(ctx, o)
		if err == nil {
			return snap, nil
		}
		if !relistable(err) {
			return Change{}, err
		}
		wait, _ := waits.Next()
		wait = max(wait, retryAfter(err))
		if c.policy.OnRetry != nil {
			c.policy.OnRetry(err, 0, wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Change{}, ctx.Err()
		case <-t.C:
		}
	}
}

// relistable reports whether a listing that failed with err is tried
// again: its snapshot expired, or its last try's error was transient (a
// listing that outlasted the policy's attempts is retried all the same:
// a cache waits for its server).
func relistable(err error) bool {
	var esc *EscalationError
	if errors.As(err, &esc) {
		err = esc.Err
	}
	return contract.ErrorCode(err) == contract.ESnapshotExpired || Classify(err) == ClassTransient
}

// listOnce reads the pages of one listing of o.Prefix; every page must
// answer the first page's position (the server carries it in the
// cursor), or the pages would not be one snapshot.
func (c *Client) listOnce(ctx context.Context, o ListWatchOptions) (Change, error) {
	snap := Change{Type: ChangeSnapshot, Snapshot: []contract.Entry{}}
	cursor := ""
	for {
		page, err := c.List(ctx, ListOptions{Prefix: o.Prefix, Limit: o.PageSize, Cursor: cursor})
		if err != nil {
			return Change{}, err
		}
		if page.Position == "" {
			return Change{}, fmt.Errorf("client: list %s: %w", o.Prefix, ErrNoPosition)
		}
		if snap.Position == "" {
			snap.Position = page.Position
		}
		if page.Position != snap.Position {
			return Change{}, fmt.Errorf("client: list %s: a page at %s after a first page at %s: %w",
				o.Prefix, page.Position, snap.Position, ErrUnexpectedAnswer)
		}
		snap.Snapshot = append(snap.Snapshot, page.Items...)
		if !page.Truncated || page.NextCursor == "" {
			return snap, nil
		}
		cursor = page.NextCursor
	}
}
