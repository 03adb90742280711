package decide

import (
	"github.com/eskv/eskv/contract"
)

// decideTouch gives the key's visible entry a new expiry: c.TTLSeconds
// from now, or none when it is 0 (persist). Everything else is the
// entry's: the value byte for byte (After is Before), its semantics but
// ttlSeconds, its specRef and its creation time. A touch is a write like
// any other, so it appends an event (kind put, op touch) at the next
// version: watchers, the projection, the audit trail and the sweeper
// learn the new expiry from it, and a later compare-and-swap that named
// the old version loses, as after any write. A key a read does not see
// (absent, deleted or expired) is not_found: a touch never brings an
// expired entry back. kvWrite has already refused a lock, leadership or
// collection (guardLock, guardCollection: their own ops renew them) and
// decided a replay or a version mismatch.
func decideTouch(w write, ev *contract.Event) Decision {
	visible := w.visible
	if visible == nil {
		return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist", ev.Key)}
	}
	ev.Op = contract.OpTouch
	ev.After = visible.Value
	ev.Semantics = visible.Semantics
	ev.SpecRef = visible.SpecRef
	return put(ev, visible, w.c.TTLSeconds, w.env.Now)
}
