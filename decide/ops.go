package decide

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/eskv/eskv/contract"
)

// decideIncrement adds c.By to the key's integer value, or starts from 0
// when the key is absent and c.Create is set. A result outside c.Min or
// c.Max is refused with out_of_range, like one outside the int64 range:
// the counter's own answer (a rate limit reached), not a lost race, so
// it leaves no kv.conflicts record (one in a transaction does, as every
// failed step does) and does not count in the conflict rate.
func decideIncrement(w write, c *KV, ev *contract.Event) Decision {
	visible := w.visible
	var base int64
	switch {
	case visible != nil:
		n, err := counterValue(visible)
		if err != nil {
			return Decision{Err: err}
		}
		base = n
	case !c.Create:
		return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist (set create to start it from 0)", ev.Key)}
	}
	if (c.By > 0 && base > math.MaxInt64-c.By) || (c.By < 0 && base < math.MinInt64-c.By) {
		err := contract.FieldErrorf(contract.EOutOfRange, "by", "adding %d leaves the 64-bit integer range", c.By)
		err.Current = visible
		return Decision{Err: err}
	}
	next := base + c.By
	if err := checkBounds(base, next, c); err != nil {
		err.Current = visible
		return Decision{Err: err}
	}
	ev.Op = contract.OpIncrement
	ev.After = json.RawMessage(strconv.FormatInt(next, 10))
	return finish(w, ev, "counter", c.TTLSeconds == 0)
}

// checkBounds refuses next, the result of adding c.By to base, when it
// lies below c.Min or above c.Max. The message names the counter's value:
// the API replaces it for a principal that may not read the key.
func checkBounds(base, next int64, c *KV) *contract.Error {
	verb, by := "adding", strconv.FormatInt(c.By, 10)
	if c.By < 0 {
		verb, by = "subtracting", strings.TrimPrefix(by, "-")
	}
	switch {
	case c.Min != nil && next < *c.Min:
		return contract.FieldErrorf(contract.EOutOfRange, "min", "the counter is %d: %s %s would take it below min %d", base, verb, by, *c.Min)
	case c.Max != nil && next > *c.Max:
		return contract.FieldErrorf(contract.EOutOfRange, "max", "the counter is %d: %s %s would take it above max %d", base, verb, by, *c.Max)
	}
	return nil
}

// counterValue is the integer value of a counter entry; any other value
// is wrong_type.
func counterValue(e *contract.Entry) (int64, error) {
	n, err := strconv.ParseInt(string(bytes.TrimSpace(e.Value)), 10, 64)
	if err != nil {
		return 0, wrongType(e, "value", "key %s does not hold an integer counter", e.Key)
	}
	return n, nil
}

// ReadCounter answers a counter read of key from its entry as a read sees
// it (nil when absent, deleted or expired: not_found).
func ReadCounter(key contract.Key, e *contract.Entry) (contract.CounterAnswer, error) {
	if e == nil {
		return contract.CounterAnswer{}, contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist", key.String())
	}
	n, err := counterValue(e)
	if err != nil {
		return contract.CounterAnswer{}, err
	}
	return contract.CounterAnswer{Key: e.Key, Value: n, Version: e.Version}, nil
}

// decidePatch sets and unsets top-level fields of the key's object value,
// when c.If holds.
func decidePatch(w write, c *KV, ev *contract.Event) Decision {
	visible := w.visible
	fields := map[string]json.RawMessage{}
	switch {
	case visible != nil:
		if err := json.Unmarshal(visible.Value, &fields); err != nil || fields == nil {
			return Decision{Err: wrongType(visible, "set", "key %s does not hold a JSON object: fields can only be patched in an object", ev.Key)}
		}
	case !c.Create:
		return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist (set create to start from {})", ev.Key)}
	}
	ev.Op = contract.OpPatch
	if c.If != nil {
		ev.Op = contract.OpFieldCAS
		got, ok := fields[c.If.Field]
		if !ok {
			got = json.RawMessage("null")
		}
		if !w.env.Equal(got, c.If.Equals) {
			return conflictDecision(w, "field_mismatch",
				"field %q does not equal if.equals", c.If.Field)
		}
	}
	for _, f := range c.Unset {
		delete(fields, f)
	}
	for f, v := range c.Set {
		fields[f] = v
	}
	after, err := marshalCompact(fields)
	if err != nil {
		return Decision{Err: contract.Errorf(contract.EInternal, "encode patched value: %v", err)}
	}
	// The message names the limit, not the size: the size would tell a
	// principal that may not read the key how large its value is.
	if c.MaxValueBytes > 0 && len(after) > c.MaxValueBytes {
		return Decision{Err: contract.FieldErrorf(contract.ETooLarge, "set", "the patched value would be over the limit of %d bytes", c.MaxValueBytes)}
	}
	ev.After = after
	return finish(w, ev, "other", c.TTLSeconds == 0)
}

// decideLock decides a lock or leader op c on its key's state (in.State)
// and what in.Known holds of its requestId: decideRequestID, a replay of
// the key's latest write, then lockWrite. It is pure.
func decideLock(c *Lock, in Input, env Env) Decision {
	w := newWrite(in.State, c.common(), &env)
	w.states = in.States
	if d, ok := decideRequestID(w, in.Known); ok {
		return d
	}
	if d, done := replayOrMismatch(w); done {
		return d
	}
	return lockWrite(w, c, newEvent(w))
}

// lockWrite acquires, extends or releases a lock or leadership for
// c.Holder on behalf of c.Principal, once its requestId was found new
// and ev is its event. A free key (absent, released or
// expired) is acquired with a new token: the event's version, which no
// later tenure can go back below. The holder re-entering from the same
// principal keeps its token and renews the lease; anyone else (another
// holder, or the same holder string from another principal) is refused
// with the current holder.
func lockWrite(w write, c *Lock, ev *contract.Event) Decision {
	visible, now := w.visible, w.env.Now
	purpose, action := c.Op.Purpose(), c.Op.LockAction()
	what, heldCode, notHolderCode := "lock", contract.ELockHeld, contract.ENotLockHolder
	if purpose == contract.PurposeLeader {
		what, heldCode, notHolderCode = "leader pool", contract.ENotLeader, contract.ENotLeader
	}
	ev.Op = c.Op
	var held LockValue
	if visible != nil {
		var err *contract.Error
		if held, err = heldLock(visible, purpose, what); err != nil {
			return Decision{Err: err}
		}
	}
	if visible == nil && action != contract.LockAcquire {
		return Decision{Err: contract.FieldErrorf(notHolderCode, "holder", "%s %s is free: %s does not hold it", what, ev.Key, c.Holder)}
	}
	if visible != nil && !held.HeldBy(c.Holder, c.Principal, visible.LastWriter) {
		code := notHolderCode
		if action == contract.LockAcquire {
			code = heldCode
		}
		err := contract.FieldErrorf(code, "holder", "%s %s is held by %s%s", what, ev.Key, held.Holder, until(visible))
		err.Current = visible
		return Decision{Err: err}
	}
	if action == contract.LockAcquire && visible != nil && held.Session != c.Session {
		under := "without a session"
		if held.Session != "" {
			under = "under session " + held.Session
		}
		err := contract.FieldErrorf(heldCode, "session", "%s %s is held by %s %s%s: re-entering it under another session would share one tenure between two sessions",
			what, ev.Key, held.Holder, under, until(visible))
		err.Current = visible
		return Decision{Err: err}
	}
	if action == contract.LockRelease {
		return removal(ev, visible, ev.Op)
	}
	if visible == nil && c.Queued && action == contract.LockAcquire {
		return Decision{Err: contract.FieldErrorf(heldCode, "holder", "%s %s is being handed to the acquires waiting for it (wait=), in arrival order: %s is behind them", what, ev.Key, c.Holder)}
	}
	if visible == nil {
		held = LockValue{Holder: c.Holder, Token: ev.Version, AcquiredAt: now, Session: c.Session}
	}
	held.Principal = c.Principal
	after, err := marshalCompact(held)
	if err != nil {
		return Decision{Err: contract.Errorf(contract.EInternal, "encode lock: %v", err)}
	}
	ev.After = after
	ev.Semantics = c.Semantics
	ev.Semantics.Purpose = purpose
	if c.Semantics.Producer == "" && len(c.Semantics.ConsumerHints) == 0 && visible != nil {
		ev.Semantics = visible.Semantics
	}
	if ev.SpecRef == "" && visible != nil {
		ev.SpecRef = visible.SpecRef
	}
	if c.Session != "" {
		return attach(w, put(ev, visible, 0, now), c.Session, purpose, held.Token)
	}
	return put(ev, visible, c.TTLSeconds, now)
}

// heldLock reads the lock value of visible, an entry a lock op of purpose
// addresses. An entry of another purpose, or whose value is no lock the
// server wrote (its token is not a version the entry has had), is
// wrong_type.
func heldLock(visible *contract.Entry, purpose, what string) (LockValue, *contract.Error) {
	var held LockValue
	if visible.Semantics.Purpose != purpose {
		return held, wrongType(visible, "key", "key %s is a %s entry, not a %s", visible.Key, visible.Semantics.Purpose, what)
	}
	if err := json.Unmarshal(visible.Value, &held); err != nil || held.Holder == "" || held.Token < 1 || held.Token > visible.Version {
		return held, wrongType(visible, "key", "key %s does not hold a %s value", visible.Key, what)
	}
	return held, nil
}

// until describes an entry's expiry for a message.
func until(e *contract.Entry) string {
	if e.ExpiresAt == nil {
		return " without expiry"
	}
	return " until " + e.ExpiresAt.Format(time.RFC3339Nano)
}

// guardLock refuses a plain write (put, delete, increment, patch) of a
// held lock or leadership: only its ops may write it. A put or delete
// that names the version it replaces breaks it on purpose (an operator's
// act): the key then holds no lock, and the next tenure's token, a later
// version, is still greater than every earlier one. An increment or
// patch would keep a lock value, so it is wrong_type even then.
func guardLock(visible *contract.Entry, c *KV) *contract.Error {
	if visible == nil || !isLockPurpose(visible.Semantics.Purpose) {
		return nil
	}
	purpose := visible.Semantics.Purpose
	if c.ExpectedVersion != nil {
		if c.Op == contract.OpPut || c.Op == contract.OpDelete {
			return nil
		}
		return wrongType(visible, "key", "key %s is a %s: use the %s operations, or break it with PUT or DELETE naming its version",
			visible.Key, purpose, purpose)
	}
	code := contract.ELockHeld
	if purpose == contract.PurposeLeader {
		code = contract.ENotLeader
	}
	var held LockValue
	_ = json.Unmarshal(visible.Value, &held)
	err := contract.FieldErrorf(code, "key", "key %s is a %s held by %s%s: use the %s operations, or name its version (expectedVersion %d) to break it on purpose",
		visible.Key, purpose, held.Holder, until(visible), purpose, visible.Version)
	err.Current = visible
	return err
}

// wrongType is the error of an op that does not fit the key's entry.
func wrongType(visible *contract.Entry, field, format string, args ...any) *contract.Error {
	err := contract.FieldErrorf(contract.EWrongType, field, format, args...)
	err.Current = visible
	return err
}

// marshalCompact encodes v as JSON without rewriting <, > and &.
func marshalCompact(v any) (json.RawMessage, error) { return contract.EncodeJSON(v) }

// common is what the rules every single-key family shares read of c: a
// lock op names no version and attempts no value of its own.
func (c *Lock) common() common {
	cm := common{Header: &c.Header, TTLSeconds: c.TTLSeconds, Semantics: c.Semantics, SpecRef: c.SpecRef, ConflictOp: c.Op}
	if c.RequestID != "" {
		cm.Digest = c.digest()
	}
	return cm
}

// digest is c's request digest (requestid.go): its head (its kind is its
// action), semantics, specRef and principal, then the parts of a write
// that is no put or delete (no addend, create, set, unset nor if), its
// holder and its purpose.
func (c *Lock) digest() string {
	parts := headParts(&c.Header, nil, nil, c.TTLSeconds)
	parts = append(parts, c.Semantics, c.SpecRef, c.Principal, int64(0), false, nil, nil, nil, c.Holder, c.Op.Purpose())
	if c.Session != "" {
		parts = append(parts, "session", c.Session)
	}
	return digestSum(parts)
}
