package stash

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Set persists s (R3, R4-R6). With an empty id it creates the stash:
// a UUID v7 id, version 1, CreatedAt now, history op "create"; the name
// is reserved in the same transaction by a create-if-absent key, so two
// creates of one name cannot both succeed (ErrDuplicateName).
//
// With an id it saves s as a compare-and-swap on the version s was read
// at (by Get, Fetch or the last Set): when another writer saved the stash
// since, Set changes nothing and returns ErrConflict; read it again,
// reapply the change and retry. A rename moves the name's reservation in
// the same transaction. A struct the caller built (not read) is saved
// only if the stored version equals its Version. The stash type cannot
// change (ErrInvalidStashType). On success s holds the new version.
func (t *Table) Set(id string, s *Stash) error {
	if s == nil {
		return fmt.Errorf("stash: Set of a nil stash: %w", ErrInvalidValue)
	}
	ctx, cancel := t.ctx()
	defer cancel()
	if id == "" {
		return t.create(ctx, s)
	}
	id, err := canonicalID(id)
	if err != nil {
		return err
	}
	return t.update(ctx, id, s)
}

// create is Set("", s), validating in the order of R3.2: name, then
// uniqueness, then type. Uniqueness is the server's (the transaction's
// create-if-absent name key); only when the type is invalid as well is
// the name key read, so that a duplicate name is still reported first.
func (t *Table) create(ctx context.Context, s *Stash) error {
	if s.Name == "" {
		return fmt.Errorf("stash: create: name is empty: %w", ErrInvalidName)
	}
	nameKey := t.nameKey(globalScope, s.Name)
	if !validType(s.StashType) {
		_, err := t.c.Get(ctx, nameKey)
		switch {
		case err == nil:
			return fmt.Errorf("stash: create: name %q is taken: %w", s.Name, ErrDuplicateName)
		case contract.ErrorCode(err) != contract.ENotFound:
			return apiError(err, "create: read the reservation of name "+s.Name)
		}
		return fmt.Errorf("stash: create: stash type %q is not one of resource, artifact, context, counter, lock: %w", s.StashType, ErrInvalidStashType)
	}
	value, err := encodeValue(s.StashType, s.Value, true)
	if err != nil {
		return err
	}
	id, err := newID()
	if err != nil {
		return err
	}
	d := doc{Name: s.Name, StashType: s.StashType, Value: value, CreatedAt: time.Now().UTC(), Op: StashOpCreate, ChangedBy: t.changedBy}
	if d.HistoryID, err = newID(); err != nil {
		return err
	}
	ops, err := putOps(putOf{t.stashKey(id), d, 0}, putOf{nameKey, nameDoc{StashID: id}, 0})
	if err != nil {
		return err
	}
	a, err := t.c.Txn(ctx, contract.TxnBody{RequestID: d.HistoryID, Ops: ops})
	if err != nil {
		if failedOp(err) == 1 && isConflict(err) {
			return fmt.Errorf("stash: create: name %q is taken: %w (%w)", s.Name, ErrDuplicateName, err)
		}
		return apiError(err, "create stash "+s.Name)
	}
	s.StashID, s.Version, s.CreatedAt = id, a.Results[0].Version, d.CreatedAt
	t.saved(s, d, value)
	return nil
}

// saved updates s after d was stored at s.Version.
func (t *Table) saved(s *Stash, d doc, value json.RawMessage) {
	if v, err := decodeValue(value); err == nil {
		s.Value = v // as a later Get returns it
	}
	s.op = ""
	s.read = &readState{id: s.StashID, version: s.Version, name: d.Name, stashType: d.StashType, createdAt: d.CreatedAt}
}

// update saves s over stash id as a compare-and-swap.
func (t *Table) update(ctx context.Context, id string, s *Stash) error {
	if s.StashID != "" && s.StashID != id {
		return fmt.Errorf("stash: Set(%q) of stash %q: %w", id, s.StashID, ErrInvalidID)
	}
	if s.Name == "" {
		return fmt.Errorf("stash: set %s: name is empty: %w", id, ErrInvalidName)
	}
	base, err := t.base(ctx, id, s)
	if err != nil {
		return err
	}
	if s.StashType != base.stashType {
		return fmt.Errorf("stash: set %s: the type of a %s stash cannot change to %q: %w", id, base.stashType, s.StashType, ErrInvalidStashType)
	}
	value, err := encodeValue(s.StashType, s.Value, false)
	if err != nil {
		return err
	}
	d := doc{Name: s.Name, StashType: s.StashType, Value: value, CreatedAt: base.createdAt, Op: s.op, ChangedBy: t.changedBy}
	if d.Op == "" {
		d.Op = StashOpSet // a Set after assigning fields directly
	}
	if d.HistoryID, err = newID(); err != nil {
		return err
	}
	var version int64
	if d.Name == base.name {
		version, err = t.put(ctx, id, d, base.version)
	} else {
		version, err = t.rename(ctx, id, d, base)
	}
	if err != nil {
		return err
	}
	s.StashID, s.Version = id, version
	t.saved(s, d, value)
	return nil
}

// base is the stored state s's change applies to: the state s was read
// at, or for a struct the caller built the stored one, which must be at
// s.Version.
func (t *Table) base(ctx context.Context, id string, s *Stash) (readState, error) {
	if s.read != nil && s.read.id == id {
		return *s.read, nil
	}
	cur, err := t.get(ctx, id)
	if err != nil {
		return readState{}, err
	}
	if cur.Version != s.Version {
		return readState{}, fmt.Errorf("stash: set %s: stored version %d, not %d: %w", id, cur.Version, s.Version, ErrConflict)
	}
	return *cur.read, nil
}

// put writes d over stash id if its version is still expected. The
// history id is the request id, so the client may retry it safely.
func (t *Table) put(ctx context.Context, id string, d doc, expected int64) (int64, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return 0, fmt.Errorf("stash: encode stash %s: %w", id, err)
	}
	res, err := t.c.Put(ctx, client.PutRequest{Key: t.stashKey(id), Value: b, ExpectedVersion: &expected, RequestID: d.HistoryID})
	if err != nil {
		return 0, apiError(err, fmt.Sprintf("set stash %s at version %d", id, expected))
	}
	return res.Entry.Version, nil
}

// rename writes d over stash id and moves its name's reservation in one
// transaction: the compare-and-swap on the stash, the old name's key
// released, the new one created if absent (ErrDuplicateName), and the
// scope checked unchanged (a concurrent ScopeTo moves the reservation).
func (t *Table) rename(ctx context.Context, id string, d doc, base readState) (int64, error) {
	scope, linkVersion, err := t.scope(ctx, id)
	if err != nil {
		return 0, err
	}
	ops, err := putOps(putOf{t.stashKey(id), d, base.version}, putOf{t.nameKey(scope, d.Name), nameDoc{StashID: id}, 0})
	if err != nil {
		return 0, err
	}
	ops = []contract.TxnOp{
		ops[0],
		{Op: contract.OpDelete, Key: t.nameKey(scope, base.name)},
		ops[1],
		{Op: contract.OpCheck, Key: t.linkKey(id), Condition: &contract.Condition{Version: &linkVersion}},
	}
	a, err := t.c.Txn(ctx, contract.TxnBody{RequestID: d.HistoryID, Ops: ops})
	switch {
	case err == nil:
		return a.Results[0].Version, nil
	case failedOp(err) == 2 && isConflict(err):
		return 0, fmt.Errorf("stash: rename %s to %q: the name is taken: %w (%w)", id, d.Name, ErrDuplicateName, err)
	case failedOp(err) == 0:
		return 0, apiError(err, fmt.Sprintf("rename stash %s at version %d", id, base.version))
	}
	return 0, fmt.Errorf("stash: rename %s: the stash's scope changed meanwhile: %w (%w)", id, ErrConflict, err)
}

// scope is the scope of stash id's name (globalScope or its trail) and
// the version of its scoped_to link key (0: none).
func (t *Table) scope(ctx context.Context, id string) (string, int64, error) {
	e, err := t.c.Get(ctx, t.linkKey(id))
	if contract.ErrorCode(err) == contract.ENotFound {
		return globalScope, 0, nil
	}
	if err != nil {
		return "", 0, apiError(err, "read the scope of stash "+id)
	}
	var l linkDoc
	if err := json.Unmarshal(e.Value, &l); err != nil || l.TrailID == "" {
		return "", 0, fmt.Errorf("stash: the scoped_to link of %s is not a link document: %w", id, errors.Join(err, ErrInvalidValue))
	}
	return l.TrailID, e.Version, nil
}

// putOf is one put of a transaction: v on key, conditioned on the key's
// version (0: the key must be absent).
type putOf struct {
	key     string
	v       any
	version int64
}

// producer is the semantics.producer of the keys a table creates.
const producer = "eskv-stash"

// purposeOf is the semantics.purpose of a stash key by stash type (the
// semantic-KV seed's purposes); a later write keeps it. A lock stash is
// "other": eskv's purpose "lock" belongs to its own lock operations.
func purposeOf(stashType string) string {
	switch stashType {
	case TypeCounter:
		return "counter"
	case TypeContext:
		return "config"
	}
	return "other"
}

// putOps are the transaction ops of puts.
func putOps(puts ...putOf) ([]contract.TxnOp, error) {
	ops := make([]contract.TxnOp, len(puts))
	for i, p := range puts {
		b, err := json.Marshal(p.v)
		if err != nil {
			return nil, fmt.Errorf("stash: encode the value of %s: %w", p.key, err)
		}
		ops[i] = contract.TxnOp{Op: contract.OpPut, Key: p.key, Value: b, Condition: &contract.Condition{Version: &p.version}}
		if p.version == 0 { // a new key: say what it is for
			purpose := "other"
			if d, ok := p.v.(doc); ok {
				purpose = purposeOf(d.StashType)
			}
			ops[i].Semantics = &contract.Semantics{Purpose: purpose, Producer: producer}
		}
	}
	return ops, nil
}
