package writer

import (
	"fmt"
	"slices"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
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

// DefaultRequestIDWindow is Config.RequestIDWindow's default: a requestId
// is remembered while it is among the key's last 1000 versions.
const DefaultRequestIDWindow = 1000

// DefaultRequestIDAge is Config.RequestIDAge's default: a requestId is
// remembered for 5 minutes after its write, however often its key is
// written meanwhile.
const DefaultRequestIDAge = 5 * time.Minute

// RequestWindow is how long a requestId is remembered on its key: while
// its write is among the key's last Versions versions, or younger than
// Age, whichever lasts longer. Versions alone passes in seconds on a hot
// key, before a client's retry after a writer's crash; Age alone would
// forget a slow key's retry sooner than before.
type RequestWindow struct {
	Versions int64
	Age      time.Duration
}

// holds reports whether a use of a requestId at prior is within the
// window of its key, at version cur, at now.
func (w RequestWindow) holds(prior projection.AppliedRequest, cur int64, now time.Time) bool {
	return prior.Version > cur-w.Versions || (w.Age > 0 && !prior.At.IsZero() && now.Sub(prior.At) < w.Age)
}

// requestMemory is what a batch knows of earlier uses of (key, requestId):
// from the overlay, from kv_history, and from the batch's own accepted
// events. A pair it does not hold was not used within the window (or is
// the key's latest write, which the state itself tells).
type requestMemory map[projection.RequestRef]projection.AppliedRequest

// requestRef names r's requestId on its key; ok is false when r carries
// none, or its decision never consults it (a denied write's audit
// record, an expire).
func requestRef(r *Request) (ref projection.RequestRef, ok bool) {
	if r.RequestID == "" || r.Denied || r.Op == contract.OpExpire {
		return ref, false
	}
	return projection.RequestRef{Key: r.Key.String(), RequestID: r.RequestID}, true
}

// add remembers an event appended by the batch.
func (m requestMemory) add(e *contract.Event) {
	if e.RequestID != "" {
		m[projection.RequestRef{Key: e.Key, RequestID: e.RequestID}] = applied(e)
	}
}

// applied is what is remembered of e's requestId: its version, time and
// digest, and for a pop the element it popped and the metadata after it,
// so that a retry of the pop answers its element even once the
// collection was written again (replayedPop).
func applied(e *contract.Event) projection.AppliedRequest {
	a := projection.AppliedRequest{Version: e.Version, Digest: e.RequestDigest, Popped: popped(e), At: e.TS}
	if a.Popped != nil {
		a.After = e.After
	}
	return a
}

// popped is the element e popped (nil unless e is a pop: lpop, rpop,
// qpop): what a replay of e answers.
func popped(e *contract.Event) *contract.Element {
	if e.Op.IsPop() && e.Element != nil {
		return e.Element
	}
	return nil
}

// get returns what is known of r's requestId on its key.
func (m requestMemory) get(r *Request) (projection.AppliedRequest, bool) {
	ref, ok := requestRef(r)
	if !ok {
		return projection.AppliedRequest{}, false
	}
	a, ok := m[ref]
	return a, ok
}

// recentRequest is a requestId of an unprojected event of an overlay
// entry's key, and the event's offset.
type recentRequest struct {
	id string
	projection.AppliedRequest
	offset int64
}

// recentRequests are the requestIds of a key's unprojected events, in
// version (and offset) order, within the window.
type recentRequests []recentRequest

// find returns the newest use of id.
func (rs recentRequests) find(id string) (projection.AppliedRequest, bool) {
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].id == id {
			return rs[i].AppliedRequest, true
		}
	}
	return projection.AppliedRequest{}, false
}

// with returns rs and e's requestId (e at offset), without the uses
// that e moves out of the window (both its versions and its age, at e's
// time).
func (rs recentRequests) with(e *contract.Event, offset int64, window RequestWindow) recentRequests {
	if e.RequestID != "" {
		rs = append(rs, recentRequest{id: e.RequestID, AppliedRequest: applied(e), offset: offset})
	}
	i := 0
	for i < len(rs) && !window.holds(rs[i].AppliedRequest, e.Version, e.TS) {
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
func (o overlayEntry) next(e *contract.Event, offset int64, window RequestWindow) overlayEntry {
	gap := o.gap
	if o.state.Version == 0 {
		gap = requestGap{version: e.Version - 1, at: e.TS}
	}
	n := overlayEntry{state: e.State(), offset: offset, requests: o.requests.with(e, offset, window), gap: gap, popped: popped(e)}
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
func (o overlayEntry) complete(window RequestWindow, now time.Time) bool {
	return o.gap.version == 0 || (o.gap.version <= o.state.Version-window.Versions && now.Sub(o.gap.at) >= window.Age)
}

// recall adds to known what the overlay remembers of ref (a requestId on
// a key) and reports whether kv_history must still be asked. e is the
// overlay's entry of the key and in whether the overlay holds it: when it
// does not, every event of the key is projected and the lookup answers
// for all of them. It takes a ref, not a request, so that every key a
// request writes (a transaction's) can be recalled alike.
func recall(ref projection.RequestRef, e overlayEntry, in bool, known requestMemory, window RequestWindow, now time.Time) (ask bool) {
	if _, done := known[ref]; done {
		return false
	}
	if in {
		if e.state.Version > 0 && e.state.Entry.RequestID == ref.RequestID {
			// The latest write: Decide replays or refuses it, and a
			// replayed pop answers the value it popped.
			if e.popped != nil {
				known[ref] = projection.AppliedRequest{Version: e.state.Version, Digest: e.state.RequestDigest, Popped: e.popped, After: e.state.Entry.Value}
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

// decideRequestID decides r when its requestId was used on the key
// before its latest write, at prior.Version: within the window (prior
// among the key's last window versions), the same request (digest) again
// is a stale request, answered 409 version_conflict naming the version it
// was applied at — but a pop's is replayed (replayOlderPop) — and
// another request under the same id is
// request_id_reused; both are recorded in kv.conflicts and write nothing.
// ok is false when the rule does not apply (no requestId, a use older
// than the window, or the key's latest write, which Decide handles): r
// is then decided by Decide. It is pure.
func decideRequestID(cur contract.State, prior projection.AppliedRequest, known bool, r *Request, now time.Time, window RequestWindow) (d decision, ok bool) {
	if r.Denied || r.Op == contract.OpExpire || !olderUse(cur, prior, known, r.RequestID, window, now) {
		return d, false
	}
	visible := cur.Visible(now)
	if prior.Digest != r.Digest() {
		return conflictDecision(cur, visible, r, now, "request_id_reused",
			"requestId %q was already used for a different write of this key (version %d)", r.RequestID, prior.Version), true
	}
	if d, ok := replayOlderPop(r, prior); ok {
		return d, true
	}
	state := fmt.Sprintf("the key is now at version %d", cur.Version)
	if visible == nil {
		state = fmt.Sprintf("the key is absent now (its last version is %d)", cur.Version)
	}
	return conflictDecision(cur, visible, r, now, "stale_request",
		"requestId %q was already applied at version %d and %s: this retry is stale, nothing was written",
		r.RequestID, prior.Version, state), true
}

// replayOlderPop answers the retry of a pop (lpop, rpop, qpop) applied
// at prior, an older version than the key's latest, as a replay: the
// element it popped and the version and metadata after it, appending
// nothing. A stale 409 would lose the element to its consumer: the pop
// removed it (or made it in flight) and a busy list or queue is written
// again before any retry. ok is false for every other request, and when
// nothing holds the popped element (the retry is then stale).
func replayOlderPop(r *Request, prior projection.AppliedRequest) (d decision, ok bool) {
	if !r.Op.IsPop() || prior.Popped == nil {
		return d, false
	}
	el := *prior.Popped
	entry := contract.Entry{Key: r.Key.String(), Version: prior.Version, Value: prior.After}
	return decision{result: Result{Entry: entry, Replayed: true, Changed: true, Element: &el}}, true
}

// olderUse reports whether prior (when known) is a use of requestID on a
// key, whose state is cur, that the window remembers at now and that is
// not the key's latest write (Decide's rule): among its last
// window.Versions versions, or younger than window.Age. Comparing
// prior.Digest with the request's is left to the caller (a transaction
// compares its own digest, carried by each of its events).
func olderUse(cur contract.State, prior projection.AppliedRequest, known bool, requestID string, window RequestWindow, now time.Time) bool {
	switch {
	case !known || requestID == "":
		return false
	case cur.Version > 0 && cur.Entry.RequestID == requestID:
		return false
	}
	return prior.Version <= cur.Version && window.holds(prior, cur.Version, now)
}

// decide is Decide preceded by decideRequestID on what known holds of
// r's requestId.
func decide(cur contract.State, known requestMemory, r *Request, now time.Time, epoch int64, window RequestWindow) decision {
	prior, ok := known.get(r)
	if d, ok := decideRequestID(cur, prior, ok, r, now, window); ok {
		return d
	}
	return Decide(cur, r, now, epoch)
}
