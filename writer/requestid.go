package writer

import (
	"slices"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
)

// Idempotency beyond a key's latest write.
//
// Decide replays a request that repeats the key's latest write (same
// requestId, same digest). A retry of an older write — put sync-1, put
// sync-2, retry sync-1 — would otherwise be applied again and move the
// key back. So a requestId is remembered per key while it belongs to one
// of the key's last Config.RequestIDWindow versions, or for
// Config.RequestIDAge after its write, whichever is longer
// (RequestWindow): a count of versions alone passes in seconds on a hot
// key, before a client retries after a writer crashed:
//
//   - projected events: kv_history holds every event's JSON and time,
//     and projection.Store.StatesAndRequests finds the newest one of a
//     key that carried a requestId (an index probe), in the round trip
//     that reads the batch's states;
//   - events the projection may not hold yet: each overlay entry keeps
//     the requestIds of the key's unprojected events (recentRequests),
//     filled by process() after a commit, by catchUp() from the log and
//     by resume() from what a failed round left, and dropped once the
//     projection holds them — with the entry, or by trim (forget) from
//     the entry of a key written without pause, which then asks
//     kv_history (complete). So the overlay's memory of requestIds is
//     the projector's lag, not the window's age, and it is bounded like
//     the overlay's keys (MaxOverlay: partition.submit);
//   - events decided earlier in the same batch: decideAll adds each
//     accepted event to the batch's requestMemory.
//
// The pieces work on (key, requestId) pairs, not on requests, so a
// request that writes several keys (a transaction, whose events all carry
// its requestId and its digest) recalls each written key (recall) and
// asks olderUse of each with its own digest.
//
// Everything is in the log, so a restarted writer or a new owner of the
// partition knows the same. decideRequestID then decides on what is
// known, purely: the same request again is a stale request (409
// version_conflict, nothing written) unless it is a pop, which answers
// the element it popped as a replay, another request under the same id
// is request_id_reused. The window makes the rule deterministic: an
// older use is ignored wherever it is found (its age is measured from
// the event's ts, which kv_history keeps, to the deciding writer's
// clock). History retention (when it
// deletes kv_history rows) and a projection rebuilt from the compacted
// topic shorten what is remembered to what they keep.

// recentRequest is a requestId of an unprojected event of an overlay
// entry's key, and the event's offset.
type recentRequest struct {
	id string
	decide.AppliedRequest
	offset int64
}

// recentRequests are the requestIds of a key's unprojected events, in
// version (and offset) order, within the window.
type recentRequests []recentRequest

// find returns the newest use of id.
func (rs recentRequests) find(id string) (decide.AppliedRequest, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].id == id {
			return rs[i].AppliedRequest, true
		}
	}
	return decide.AppliedRequest{}, false
}

// with returns rs and e's requestId (e at offset), without the uses
// that e moves out of the window (both its versions and its age, at e's
// time).
func (rs recentRequests) with(e *contract.Event, offset int64, window decide.RequestWindow) recentRequests {
	if e.RequestID != "" {
		rs = append(rs, recentRequest{id: e.RequestID, AppliedRequest: decide.Applied(e), offset: offset})
	}
	i := 0
	for i < len(rs) && !window.Holds(rs[i].AppliedRequest, e.Version, e.TS) {
		i++
	}
	if i == 0 {
		return rs
	}
	// Copy rather than reslice, so the dropped ids are freed.
	return slices.Clone(rs[i:])
}

// requestGap is what an overlay entry does not remember of its key's
// requestIds: the uses up to version, all written at or before at. A
// new entry's gap is the key's events before its first (projected: at
// is that first event's time, no earlier event is later), and trim adds
// the uses the projection came to hold (forget).
type requestGap struct {
	version int64
	at      time.Time
}

// next is the overlay entry of e's key after e, appended at offset: the
// state after e, and the key's unprojected requestIds with e's. A new
// entry's memory starts at e: the key's earlier events are all projected.
func (o overlayEntry) next(e *contract.Event, offset int64, window decide.RequestWindow) overlayEntry {
	gap := o.gap
	if o.state.Version == 0 {
		gap = requestGap{version: e.Version - 1, at: e.TS}
	}
	n := overlayEntry{state: keystate.FromEvent(e), offset: offset, requests: o.requests.with(e, offset, window), gap: gap, popped: decide.Popped(e)}
	return n.withElement(o, e).withItem(e, offset)
}

// forget drops the uses the projection holds (offset below next), which
// kv_history answers for, and reports how many: the entry of a key
// written without pause is never trimmed, and would otherwise keep
// every use of the window's age.
func (o overlayEntry) forget(next int64) (overlayEntry, int) {
	i := 0
	for i < len(o.requests) && o.requests[i].offset < next {
		o.gap.version = max(o.gap.version, o.requests[i].Version)
		if o.requests[i].At.After(o.gap.at) {
			o.gap.at = o.requests[i].At
		}
		i++
	}
	if i > 0 {
		o.requests = slices.Clone(o.requests[i:])
	}
	return o, i
}

// complete reports whether the entry remembers the requestIds of all the
// key's versions within the window at now: its gap is empty (the key was
// created since the projection's offset) or out of the window in both
// versions and age. Then kv_history has nothing to add, and a requestId
// the entry does not know was not used.
func (o overlayEntry) complete(window decide.RequestWindow, now time.Time) bool {
	return o.gap.version == 0 || (o.gap.version <= o.state.Version-window.Versions && now.Sub(o.gap.at) >= window.Age)
}

// recall adds to known what the overlay remembers of ref (a requestId on
// a key) and reports whether kv_history must still be asked. e is the
// overlay's entry of the key, nil when the overlay does not hold it:
// then every event of the key is projected and the lookup answers for
// all of them. It takes a ref, not a request, so that every key a
// request writes (a transaction's) can be recalled alike.
func recall(ref decide.RequestRef, e *overlayEntry, known decide.Memory, window decide.RequestWindow, now time.Time) (ask bool) {
	if _, done := known[ref]; done {
		return false
	}
	if e != nil {
		if e.state.Version > 0 && e.state.Entry.RequestID == ref.RequestID {
			// The latest write: Decide replays or refuses it, and a
			// replayed pop answers the value it popped.
			if e.popped != nil {
				known[ref] = decide.AppliedRequest{Version: e.state.Version, Digest: e.state.RequestDigest, Popped: e.popped, After: e.state.Entry.Value}
			}
			return false
		}
		if a, found := e.requests.find(ref.RequestID); found {
			known[ref] = a
			return false
		}
		if e.complete(window, now) {
			return false // never used within the window
		}
	}
	return true
}
