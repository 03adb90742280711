package decide

import (
	"encoding/json"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// Sessions (contract/session.go, docs/sessions.md). A session is an
// entry of purpose session whose value lists the keys, locks and
// leaderships attached to it (contract.SessionValue). Attaching is a
// write of two keys of one project, decided here as one: the attached
// key's event and the session's (op session_attach, its list after it),
// under one txnId. Ending a session (revoke, a DELETE of its key, its
// expiry) is one decision over the session's entry and the states of its
// attached keys, which the writer reads with it (every live session's
// attached keys, writer/sessions.go): one delete or release event per
// key still the session's, and the session's own end event, under one
// txnId, all naming the session and why it ended (Event.Session).

// sessionValue reads the value of e, an entry of purpose session; any
// other entry, or a value that is no session's, is wrong_type.
func sessionValue(e *contract.Entry, field string) (contract.SessionValue, *contract.Error) {
	var v contract.SessionValue
	if e.Semantics.Purpose != contract.PurposeSession {
		return v, wrongType(e, field, "key %s is a %s entry, not a session", e.Key, e.Semantics.Purpose)
	}
	if err := json.Unmarshal(e.Value, &v); err != nil || v.TTLSeconds < 1 {
		return v, wrongType(e, field, "key %s does not hold a session value", e.Key)
	}
	return v, nil
}

// guardSession refuses a plain write of a session's entry (only its ops
// write it; a DELETE ends it as a revoke does), and a session op on an
// entry that is no session.
func guardSession(visible *contract.Entry, op contract.Op) *contract.Error {
	if visible == nil {
		return nil
	}
	sessionOp := op == contract.OpSessionKeepAlive || op == contract.OpSessionRevoke || op == contract.OpSessionCreate
	switch {
	case visible.Semantics.Purpose == contract.PurposeSession && !sessionOp && op != contract.OpDelete:
		return wrongType(visible, "key", "key %s is a session: use keepalive or revoke (a DELETE ends it too)", visible.Key)
	case visible.Semantics.Purpose != contract.PurposeSession && sessionOp && op != contract.OpSessionCreate:
		return wrongType(visible, "key", "key %s is a %s entry, not a session", visible.Key, visible.Semantics.Purpose)
	}
	return nil
}

// decideSessionCreate starts a session at the key: its value lists no
// attached key yet, its expiry is c.TTLSeconds from now. The API names
// expectedVersion 0, so a key that holds a live entry was refused
// version_mismatch (replayOrMismatch).
func decideSessionCreate(w write, c *KV, ev *contract.Event) Decision {
	after, err := marshalCompact(contract.SessionValue{TTLSeconds: c.TTLSeconds, Attached: []contract.Attachment{}})
	if err != nil {
		return Decision{Err: contract.Errorf(contract.EInternal, "encode session: %v", err)}
	}
	ev.Op, ev.After = contract.OpSessionCreate, after
	ev.Semantics = contract.Semantics{Purpose: contract.PurposeSession}
	d := put(ev, nil, c.TTLSeconds, w.env.Now)
	d.Result.Session = sessionAnswer(ev.Entry(), nil)
	return d
}

// decideKeepAlive renews the session: its expiry is its TTL from now, its
// value (the attached keys) kept. An expired session is not_found, as a
// touch of an expired key is: the sweeper ends it.
func decideKeepAlive(w write, ev *contract.Event) Decision {
	visible := w.visible
	if visible == nil {
		return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "session %s does not exist (it ended or expired)", ev.Key)}
	}
	v, err := sessionValue(visible, "key")
	if err != nil {
		return Decision{Err: err}
	}
	ev.Op, ev.After = contract.OpSessionKeepAlive, visible.Value
	ev.Semantics, ev.SpecRef = visible.Semantics, visible.SpecRef
	d := put(ev, visible, v.TTLSeconds, w.env.Now)
	d.Result.Session = sessionAnswer(ev.Entry(), nil)
	return d
}

// decideRevoke ends the live session at the key (endSession).
func decideRevoke(w write, ev *contract.Event) Decision {
	visible := w.visible
	if visible == nil {
		return Decision{Err: contract.FieldErrorf(contract.ENotFound, "key", "session %s does not exist (it ended or expired)", ev.Key)}
	}
	if _, err := sessionValue(visible, "key"); err != nil {
		return Decision{Err: err}
	}
	d := removal(ev, visible, contract.OpSessionRevoke)
	return endSession(w, d, contract.SessionRevoked)
}

// endSession completes d, the decision appending the end event of the
// session w writes (a revoke's, a delete's or an expiry's), with the
// delete or release of each key attached to it that is still the
// session's (attachedLive), before the session's own event, under one
// txnId; each event names the session and reason. A key whose state
// the batch did not read is an internal error: the end is refused
// rather than leave a key outliving its session.
func endSession(w write, d Decision, reason string) Decision {
	sess := d.Event
	v, verr := sessionValue(&w.cur.Entry, "key")
	if verr != nil {
		return Decision{Err: verr}
	}
	link := &contract.SessionLink{Key: sess.Key, Reason: reason}
	evs := make([]*contract.Event, 0, len(v.Attached)+1)
	var ended []string
	for _, a := range v.Attached {
		st, ok := w.states[a.Key]
		if !ok {
			return Decision{Err: contract.Errorf(contract.EInternal, "the state of %s, attached to session %s, was not read", a.Key, sess.Key)}
		}
		if !attachedLive(a, st, w.env) {
			continue
		}
		key, err := contract.ParseKey(a.Key)
		if err != nil {
			return Decision{Err: contract.Errorf(contract.EInternal, "key %s attached to session %s: %v", a.Key, sess.Key, err)}
		}
		kw := newWrite(st, common{Header: &Header{Key: key, Principal: sess.Principal}}, w.env)
		ev := newEvent(kw)
		op := contract.OpDelete
		switch a.Purpose {
		case contract.PurposeLock:
			op = contract.OpLockRelease
		case contract.PurposeLeader:
			op = contract.OpLeaderResign
		}
		removal(ev, kw.visible, op)
		ev.Session = link
		evs = append(evs, ev)
		ended = append(ended, a.Key)
	}
	sess.Session = link
	evs = append(evs, sess)
	id := txnID(sess.Key, sess.Version)
	for _, ev := range evs {
		ev.TxnID, ev.TxnSize = id, len(evs)
	}
	res := d.Result
	res.Session = contract.SessionAnswer{Key: sess.Key, Version: sess.Version, TTLSeconds: v.TTLSeconds,
		Attached: v.Attached, Revoked: true, Ended: ended}
	return Decision{Txn: evs, Result: res}
}

// attachedLive reports whether a, an attachment of a session, is still
// the session's on a key at state st: a plain key at the version the
// attaching write gave it, a lock or leadership in the tenure it
// attached (its token).
func attachedLive(a contract.Attachment, st keystate.State, env *Env) bool {
	visible := st.Visible(env.Now)
	if visible == nil {
		return false
	}
	if a.Purpose == "" {
		return visible.Version == a.Version
	}
	held, err := heldLock(visible, a.Purpose, a.Purpose)
	return err == nil && held.Token == a.Version
}

// attach completes d, the accepted put (or acquire, or elect) of w's key
// attaching it to the session at key session (purpose "" for a plain
// key, version its version; a lock's or leader's purpose and its
// token), with the session's event listing it: both under one txnId.
// The session must be live, in the key's project; the list drops the
// attachments no longer the session's and an earlier one of the key, and
// holds at most contract.MaxSessionKeys.
func attach(w write, d Decision, session, purpose string, version int64) Decision {
	ev := d.Event
	sk, err := contract.ParseKey(session)
	if err != nil {
		return Decision{Err: contract.FieldErrorf(contract.EInvalid, "session", "%v", err)}
	}
	if sk.Scope() != w.c.Key.Scope() {
		return Decision{Err: contract.FieldErrorf(contract.EInvalid, "session",
			"session %s is not in the project of %s: a session's keys lie in its project (%s)", session, ev.Key, sk.Scope())}
	}
	if session == ev.Key {
		return Decision{Err: contract.FieldErrorf(contract.EInvalid, "session", "a session cannot be attached to itself")}
	}
	st, ok := w.states[session]
	if !ok {
		return Decision{Err: contract.Errorf(contract.EInternal, "the state of session %s was not read", session)}
	}
	visible := st.Visible(w.env.Now)
	if visible == nil {
		return Decision{Err: contract.FieldErrorf(contract.ENotFound, "session", "session %s does not exist (it ended or expired)", session)}
	}
	v, verr := sessionValue(visible, "session")
	if verr != nil {
		return Decision{Err: verr}
	}
	list := make([]contract.Attachment, 0, len(v.Attached)+1)
	for _, a := range v.Attached {
		if a.Key == ev.Key {
			continue
		}
		if ast, read := w.states[a.Key]; read && !attachedLive(a, ast, w.env) {
			continue
		}
		list = append(list, a)
	}
	list = append(list, contract.Attachment{Key: ev.Key, Version: version, Purpose: purpose})
	if len(list) > contract.MaxSessionKeys {
		return Decision{Err: contract.FieldErrorf(contract.ETooManyKeys, "session",
			"session %s holds %d keys, locks and leaderships, the most one session may: end it, or use another session", session, contract.MaxSessionKeys)}
	}
	v.Attached = list
	after, err := marshalCompact(v)
	if err != nil {
		return Decision{Err: contract.Errorf(contract.EInternal, "encode session: %v", err)}
	}
	sw := newWrite(st, common{Header: &Header{Key: sk, Principal: w.c.Principal}}, w.env)
	sev := newEvent(sw)
	sev.Kind, sev.Op, sev.After = contract.KindPut, contract.OpSessionAttach, after
	sev.CreatedAt, sev.ExpiresAt = visible.CreatedAt, visible.ExpiresAt
	sev.Semantics, sev.SpecRef = visible.Semantics, visible.SpecRef
	ev.Session = &contract.SessionLink{Key: session}
	id := txnID(ev.Key, ev.Version)
	ev.TxnID, ev.TxnSize = id, 2
	sev.TxnID, sev.TxnSize = id, 2
	return Decision{Txn: []*contract.Event{ev, sev}, Result: d.Result}
}

// sessionAnswer is the answer of a session write from the session's
// entry after it.
func sessionAnswer(e contract.Entry, ended []string) contract.SessionAnswer {
	var v contract.SessionValue
	_ = json.Unmarshal(e.Value, &v)
	if v.Attached == nil {
		v.Attached = []contract.Attachment{}
	}
	return contract.SessionAnswer{Key: e.Key, Version: e.Version, TTLSeconds: v.TTLSeconds, ExpiresAt: e.ExpiresAt, Attached: v.Attached, Ended: ended}
}

// SessionOf reads a session's entry as a read sees it (nil: not_found).
func SessionOf(key contract.Key, e *contract.Entry) (contract.SessionAnswer, error) {
	if e == nil {
		return contract.SessionAnswer{}, contract.FieldErrorf(contract.ENotFound, "key", "session %s does not exist (it ended or expired)", key.String())
	}
	if _, err := sessionValue(e, "key"); err != nil {
		return contract.SessionAnswer{}, err
	}
	return sessionAnswer(*e, nil), nil
}
