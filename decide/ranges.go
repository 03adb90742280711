package decide

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// Prefix writes: a range delete and an expireDue decide on every key
// under a prefix, which no request names one by one. Their plan names
// the prefix (PrefixRef); the writer reads the keys under it — its own
// batch's decisions, the overlay's unprojected writes, and the
// projection's keys — and gives them, with their states, to the decision
// (PrefixKeys). Each key is then decided by the single-key rules
// (kvWrite): a range delete as a DELETE naming the key's version, an
// expireDue as the sweeper's expire.

// PrefixRef is a prefix a batch reads the keys under: those after After
// (a cursor), in key order, at least Limit+1 of them when there are as
// many (so that a decision can tell a range of Limit keys from a larger
// one). With Due, only keys whose entry is past its expiry matter (an
// expireDue); otherwise only the keys a read sees.
type PrefixRef struct {
	Prefix string
	After  string
	Limit  int
	Due    bool
}

// PrefixKeys is what a batch read under a PrefixRef: Keys, in key order,
// every key under the prefix after the cursor up to Bound that the
// batch knows a state of (Input.States holds each; some may be deleted
// or expired), and Bound, "" when Keys holds every such key, else the
// last key read from the projection: keys past it were not read.
type PrefixKeys struct {
	Keys  []string
	Bound string
}

// Ref is what c reads: the keys under its prefix after its cursor.
func (c *Range) Ref() PrefixRef {
	return PrefixRef{Prefix: c.Prefix, After: c.After, Limit: contract.MaxRangeKeys, Due: c.Op == contract.OpExpireDue}
}

// decideRange decides a prefix write on the keys under its prefix
// (in.Under) and their states (in.States). It is pure.
//
// The keys it writes are the first contract.MaxRangeKeys, in key order,
// of those it concerns: the live ones a read sees for a range delete,
// those past their expiry for an expireDue. When more may follow (more
// keys, or in.Under.Bound set) a range delete without Chunked is refused
// too_many_keys and writes nothing; otherwise the answer is truncated,
// its NextCursor the last key written (the bound when none was).
//
// A range delete appends one delete event per key, at the key's next
// version, under one transaction id (TxnID, TxnSize: a watcher sees
// them as one transaction); an expireDue appends the sweeper's expire
// events, with no transaction id (each is the expiry the sweeper would
// have appended). Both are appended in the batch's one Kafka
// transaction, so all or none of them commit.
func decideRange(c *Range, in Input, env Env) Decision {
	keys := c.concerned(in, &env)
	more := in.Under.Bound != "" || len(keys) > contract.MaxRangeKeys
	if more && c.Op == contract.OpDeleteRange && !c.Chunked {
		return c.refused(contract.FieldErrorf(contract.ETooManyKeys, "prefix",
			"more than %d keys lie under %s: nothing was deleted; delete them in chunks (chunked) or under longer prefixes",
			contract.MaxRangeKeys, c.Prefix), env)
	}
	keys = keys[:min(len(keys), contract.MaxRangeKeys)]
	evs := make([]*contract.Event, 0, len(keys))
	size := 0
	// states is in.States with the events decided so far: a session's
	// end under the prefix deletes its attached keys, which a later key
	// of the range (or another session's end) must see deleted.
	states := maps.Clone(in.States)
	done := 0
	for _, k := range keys {
		if !c.concerns(states[k], &env) { // an earlier session's end wrote it
			done++
			continue
		}
		kevs, err := c.writeKey(k, states, &env)
		if err != nil {
			return Decision{Err: err}
		}
		// The first key's events are always taken: alone over the
		// budget, the batch refuses them 413.
		for _, ev := range kevs {
			size += EventBytes(ev)
		}
		// A session's end brings its attached keys' events along: the
		// events, as the keys, are at most contract.MaxRangeKeys (but
		// the first key's).
		if len(evs) > 0 && len(evs)+len(kevs) > contract.MaxRangeKeys {
			if c.Op == contract.OpDeleteRange && !c.Chunked {
				return Decision{Err: contract.FieldErrorf(contract.ETooManyKeys, "prefix",
					"the keys under %s and those attached to the sessions among them are more than %d: nothing was deleted; delete them in chunks (chunked) or under longer prefixes",
					c.Prefix, contract.MaxRangeKeys)}
			}
			more = true
			break
		}
		if env.MaxAppendBytes > 0 && size > env.MaxAppendBytes && len(evs) > 0 {
			if c.Op == contract.OpDeleteRange && !c.Chunked {
				return c.refused(contract.FieldErrorf(contract.ETooLarge, "prefix",
					"the delete events of the keys under %s (their values included) take more than the %d bytes a partition appends in one Kafka transaction: nothing was deleted; delete them in chunks (chunked) or under longer prefixes",
					c.Prefix, env.MaxAppendBytes), env)
			}
			more = true
			break
		}
		for _, ev := range kevs {
			states[ev.Key] = keystate.FromEvent(ev)
		}
		evs = append(evs, kevs...)
		done++
	}
	keys = keys[:done]
	a := contract.PrefixAnswer{Prefix: c.Prefix, Count: len(evs), Truncated: more}
	if more {
		a.NextCursor = in.Under.Bound
		if len(keys) > 0 {
			a.NextCursor = keys[len(keys)-1]
		}
	}
	if c.Op == contract.OpDeleteRange && len(evs) > 0 {
		a.TxnID = txnID(evs[0].Key, evs[0].Version)
		for _, ev := range evs {
			ev.TxnID, ev.TxnSize = a.TxnID, len(evs)
		}
	}
	return Decision{Txn: evs, Result: Result{Prefix: a}}
}

// refused refuses c with err, for what lies under its prefix, and
// records the refusal in kv.conflicts as a refused write of a key is
// (conflictDecision): one record, its key the prefix, its reason err's
// code, no values (a range delete names none), under the correlation id
// err carries. Only an atomic range delete is refused so; a chunked one
// and an expireDue stop short instead, and a version conflict cannot
// happen (each key's delete names the version the decision sees).
func (c *Range) refused(err *contract.Error, env Env) Decision {
	id := env.NewID()
	err.CorrelationID = id
	return Decision{Err: err, Conflict: &Conflict{
		SchemaVersion:   contract.SchemaVersion,
		ID:              id,
		Key:             c.Prefix,
		Scope:           c.Key.Scope(),
		Op:              c.Op,
		ExpectedVersion: -1,
		Attempted:       json.RawMessage("null"),
		Current:         json.RawMessage("null"),
		Semantics:       contract.Semantics{Purpose: "other"},
		RequestID:       c.RequestID,
		Principal:       c.Principal,
		TS:              env.Now,
		Reason:          err.Code,
	}}
}

// rangeRecordOverhead is at least what a delete or expire event's record
// takes besides the parts EventBytes counts: the event's fixed members,
// numbers and times, the record's headers but those naming the key, and
// the record's own overhead (about 600 bytes with the default source
// eskv-writer; the rest leaves room for a source of 150 characters).
const rangeRecordOverhead = 800

// EventBytes is at least the bytes of ev's kv.changes record, for a
// delete or expire event (it counts no after value nor element): its key
// five times (member, scope, record key, event id and subject headers),
// its before value, specRef, principal and semantics, and a fixed
// allowance (about 1020 bytes for a key of 40 characters and a small
// value: 1000 of them fit Kafka's default max.message.bytes). A
// prefix write stops (chunked) or refuses (atomic) before its events
// exceed Env.MaxAppendBytes, so the batch's byte budget never finds them
// too large.
func EventBytes(ev *contract.Event) int {
	n := rangeRecordOverhead + 5*len(ev.Key) + len(ev.Before) + len(ev.SpecRef) + len(ev.Principal) + len(ev.Semantics.Producer)
	for _, h := range ev.Semantics.ConsumerHints {
		n += len(h) + 3
	}
	return n
}

// concerned lists, in key order, the keys of in.Under that c writes:
// under c's prefix, after its cursor and up to the bound, the live keys
// a read sees (a range delete) or the live keys past their expiry (an
// expireDue).
func (c *Range) concerned(in Input, env *Env) []string {
	out := make([]string, 0, len(in.Under.Keys))
	for _, k := range in.Under.Keys {
		if !strings.HasPrefix(k, c.Prefix) || k <= c.After || (in.Under.Bound != "" && k > in.Under.Bound) {
			continue
		}
		if c.concerns(in.States[k], env) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// concerns reports whether c writes a key at state st: a range delete
// the live keys a read sees, an expireDue the live keys past their
// expiry.
func (c *Range) concerns(st keystate.State, env *Env) bool {
	if c.Op == contract.OpExpireDue {
		return st.Live && st.Entry.Expired(env.Now)
	}
	return st.Visible(env.Now) != nil
}

// writeKey is c's event on key k at its state in states: a delete
// naming the key's version (which breaks a lock or a leadership as a
// DELETE naming it does, removes a collection whole, and ends a session
// with its attached keys), or the sweeper's expire (a session's with
// its attached keys).
func (c *Range) writeKey(k string, states map[string]keystate.State, env *Env) ([]*contract.Event, error) {
	st := states[k]
	key, err := contract.ParseKey(k)
	if err != nil {
		return nil, contract.Errorf(contract.EInternal, "key %s under %s: %v", k, c.Prefix, err)
	}
	version := st.Version
	op := contract.OpDelete
	if c.Op == contract.OpExpireDue {
		op = contract.OpExpire
	}
	kv := &KV{Header: Header{Key: key, Op: op, Principal: c.Principal}, ExpectedVersion: &version}
	w := newWrite(st, kv.common(), env)
	w.states = states
	d := kvWrite(w, kv)
	if evs := d.Appends(); len(evs) > 0 {
		return evs, nil
	}
	return nil, d.Err
}
