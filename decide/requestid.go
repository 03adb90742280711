package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// Idempotency beyond a key's latest write (the writer's requestid.go
// tells where the memory comes from).
//
// replayOrMismatch replays a write that repeats the key's latest write (same
// requestId, same digest). A retry of an older write — put sync-1, put
// sync-2, retry sync-1 — would otherwise be applied again and move the
// key back. So a requestId is remembered per key while it belongs to one
// of the key's last RequestWindow.Versions versions, or for
// RequestWindow.Age after its write, whichever is longer, and the batch
// deciding a write hands what it knows of earlier uses in a Memory.
// decideRequestID then decides on what is known, purely: the same
// request again is a stale request (409 version_conflict, nothing
// written) unless it is a pop, which answers the element it popped as a
// replay; another request under the same id is request_id_reused. The
// window makes the rule deterministic: an older use is ignored wherever
// it is found (its age is measured from the event's ts to the deciding
// writer's clock).

// DefaultRequestIDWindow is writer.Config.RequestIDWindow's default: a requestId
// is remembered while it is among the key's last 1000 versions.
const DefaultRequestIDWindow = 1000

// DefaultRequestIDAge is writer.Config.RequestIDAge's default: a requestId is
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

// Holds reports whether a use of a requestId at prior is within the
// window of its key, at version cur, at now.
func (w RequestWindow) Holds(prior AppliedRequest, cur int64, now time.Time) bool {
	return prior.Version > cur-w.Versions || (w.Age > 0 && !prior.At.IsZero() && now.Sub(prior.At) < w.Age)
}

// Memory is what a batch knows of earlier uses of (key, requestId):
// from the overlay, from kv_history, and from the batch's own accepted
// events. A pair it does not hold was not used within the window (or is
// the key's latest write, which the state itself tells).
type Memory map[RequestRef]AppliedRequest

// requestRef names h's requestId on its key; ok is false when h carries
// none, or its decision never consults it (a denied write's audit
// record, an expire).
func requestRef(h *Header, denied bool) (ref RequestRef, ok bool) {
	if h.RequestID == "" || denied || h.Op == contract.OpExpire {
		return ref, false
	}
	return RequestRef{Key: h.Key.String(), RequestID: h.RequestID}, true
}

// Add remembers an event appended by the batch.
func (m Memory) Add(e *contract.Event) {
	if e.RequestID != "" {
		m[RequestRef{Key: e.Key, RequestID: e.RequestID}] = Applied(e)
	}
}

// Applied is what is remembered of e's requestId: its version, time and
// digest, and for a pop the element it popped and the metadata after it,
// so that a retry of the pop answers its element even once the
// collection was written again (replayedPop).
func Applied(e *contract.Event) AppliedRequest {
	a := AppliedRequest{Version: e.Version, Digest: e.RequestDigest, Popped: Popped(e), At: e.TS}
	if a.Popped != nil {
		a.After = e.After
	}
	return a
}

// Popped is the element e popped (nil unless e is a pop: lpop, rpop,
// qpop): what a replay of e answers.
func Popped(e *contract.Event) *contract.Element {
	if isPop(e.Op) && e.Element != nil {
		return e.Element
	}
	return nil
}

// Get returns what is known of c's requestId on its key.
func (m Memory) Get(c Command) (AppliedRequest, bool) { return m.get(c.Head(), isDenied(c)) }

// isDenied reports whether c is a denied write (only ever a KV command).
func isDenied(c Command) bool {
	kv, ok := c.(*KV)
	return ok && kv.Denied
}

// get returns what is known of h's requestId on its key (none for a
// denied write's).
func (m Memory) get(h *Header, denied bool) (AppliedRequest, bool) {
	ref, ok := requestRef(h, denied)
	if !ok {
		return AppliedRequest{}, false
	}
	a, ok := m[ref]
	return a, ok
}

// decideRequestID decides w when its requestId was used on the key
// before its latest write, at prior.Version: within the window (prior
// among the key's last window versions), the same request (digest) again
// is a stale request, answered 409 version_conflict naming the version it
// was applied at — but a pop's is replayed (replayOlderPop) — and
// another request under the same id is
// request_id_reused; both are recorded in kv.conflicts and write nothing.
// ok is false when the rule does not apply (no requestId, an expire, a
// use older than the window, or the key's latest write, which
// replayOrMismatch handles): w is then decided by its family's rules. A denied write
// never asks it (it is only audited). It is pure.
func decideRequestID(w write, known Memory) (d Decision, ok bool) {
	cur, r := w.cur, w.c
	prior, found := known.get(r.Header, false)
	if r.Op == contract.OpExpire || !found || !olderUse(cur, prior, r.RequestID, w.env) {
		return d, false
	}
	if prior.Digest != r.Digest {
		return conflictDecision(w, "request_id_reused",
			"requestId %q was already used for a different write of this key (version %d)", r.RequestID, prior.Version), true
	}
	if d, ok := replayOlderPop(r.Header, prior); ok {
		return d, true
	}
	state := fmt.Sprintf("the key is now at version %d", cur.Version)
	if w.visible == nil {
		state = fmt.Sprintf("the key is absent now (its last version is %d)", cur.Version)
	}
	return conflictDecision(w, "stale_request",
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
func replayOlderPop(r *Header, prior AppliedRequest) (d Decision, ok bool) {
	if !isPop(r.Op) || prior.Popped == nil {
		return d, false
	}
	el := *prior.Popped
	entry := contract.Entry{Key: r.Key.String(), Version: prior.Version, Value: prior.After}
	return Decision{Result: Result{Entry: entry, Replayed: true, Changed: true, Element: &el}}, true
}

// olderUse reports whether prior (a known one) is a use of requestID on a
// key, whose state is cur, that the window remembers at now and that is
// not the key's latest write (replayOrMismatch's rule): among its last
// window.Versions versions, or younger than window.Age. Comparing
// prior.Digest with the request's is left to the caller (a transaction
// compares its own digest, carried by each of its events).
func olderUse(cur keystate.State, prior AppliedRequest, requestID string, env *Env) bool {
	switch {
	case requestID == "":
		return false
	case cur.Version > 0 && cur.Entry.RequestID == requestID:
		return false
	}
	return prior.Version <= cur.Version && env.Window.Holds(prior, cur.Version, env.Now)
}

// Digests. A command's digest identifies its body, so that a retried
// requestId can be told from a reused one; the principal is part of it
// (another principal reusing a requestId is a different request). Each
// family's digest method lists its parts; they keep the names, order and
// encodings digests were first written with, when every family was read
// as one flat request (a part a family does not have is its zero value;
// the optional parts are appended only when given): digests are stored
// with events, and a retry must match the one stored before any change
// (TestDigestPinned).

// digestSum is the digest of parts: the first 16 bytes of the SHA-256 of
// their JSON, in hex.
func digestSum(parts []any) string {
	b, _ := json.Marshal(parts)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// headParts are the parts every single-key digest begins with: the
// write's kind (its op, a lock op's by its action), key, value, expected
// version (decimal, "" for none) and TTL. Semantics, specRef and
// principal follow.
func headParts(h *Header, value json.RawMessage, expected *int64, ttl int64) []any {
	var ev string
	if expected != nil {
		ev = strconv.FormatInt(*expected, 10)
	}
	kind := string(h.Op)
	if a := h.Op.LockAction(); a != "" {
		kind = string(a)
	}
	return []any{kind, h.Key.String(), value, ev, ttl}
}

// collectionParts are the parts a collection write's digest begins with:
// its head, no semantics nor specRef, its principal, then the parts of a
// write that is no put or delete (an increment's addend and create, a
// patch's set, unset and if, a lock's holder: none here) and the purpose
// its op forces.
func collectionParts(h *Header, value json.RawMessage, expected *int64, ttl int64) []any {
	parts := headParts(h, value, expected, ttl)
	return append(parts, contract.Semantics{}, "", h.Principal, int64(0), false, nil, nil, nil, "", h.Op.Purpose())
}

// isPop reports whether op removes an element and answers it (lpop,
// rpop, qpop): a retry of it is answered with the element it popped.
func isPop(op contract.Op) bool {
	return op == contract.OpLPop || op == contract.OpRPop || op == contract.OpQPop
}
