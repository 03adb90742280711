package stash

import (
	"context"
	"fmt"

	"github.com/eskv/eskv/contract"
)

// Delete removes stash id (R11): its key, its name's reservation and its
// scoped_to link, in one transaction conditioned on the version read, so
// either all go or none does. A held lock is refused with ErrLockHeld,
// decided on that version; a lock acquired meanwhile makes the
// transaction fail with ErrConflict instead (read again, and the lock is
// held). Afterwards Get, Fetch and History no longer know the id, and ids
// are never reused. eskv's audit trail keeps its rows of the stash's
// changes: hashes of the values, never the values.
func (t *Table) Delete(id string) error {
	id, err := canonicalID(id)
	if err != nil {
		return err
	}
	ctx, cancel := t.ctx()
	defer cancel()
	s, err := t.get(ctx, id)
	if err != nil {
		return err
	}
	return t.deleteRead(ctx, s)
}

// deleteRead deletes stash s as it was read: the lock check and the
// compare-and-swap are on s.Version.
func (t *Table) deleteRead(ctx context.Context, s *Stash) error {
	id := s.StashID
	if s.StashType == TypeLock {
		holder, err := lockHolder(s.Value)
		if err != nil {
			return err
		}
		if holder != "" {
			return fmt.Errorf("stash: delete lock %q: held by %q: %w", s.Name, holder, ErrLockHeld)
		}
	}
	scope, linkVersion, err := t.scope(ctx, id)
	if err != nil {
		return err
	}
	version := s.Version
	ops := []contract.TxnOp{
		{Op: contract.OpDelete, Key: t.stashKey(id), Condition: &contract.Condition{Version: &version}},
		{Op: contract.OpDelete, Key: t.nameKey(scope, s.Name)},
	}
	link := contract.TxnOp{Op: contract.OpDelete, Key: t.linkKey(id), Condition: &contract.Condition{Version: &linkVersion}}
	if linkVersion == 0 {
		link = contract.TxnOp{Op: contract.OpCheck, Key: t.linkKey(id), Condition: &contract.Condition{Version: &linkVersion}}
	}
	requestID, err := newID()
	if err != nil {
		return err
	}
	_, err = t.c.Txn(ctx, contract.TxnBody{RequestID: requestID, Ops: append(ops, link)})
	switch {
	case err == nil:
		return nil
	case failedOp(err) == 0:
		return apiError(err, fmt.Sprintf("delete stash %s at version %d", id, version))
	}
	return fmt.Errorf("stash: delete %s: its name or scope changed meanwhile: %w (%w)", id, ErrConflict, err)
}
