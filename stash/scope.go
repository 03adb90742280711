package stash

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Trail scoping (R13). The PRD keeps a stash's scope in its links table
// as a scoped_to link from the stash to a trail; here the link is the key
// <project>/stash-scope/<StashID> holding {"linkType": "scoped_to",
// "stashId", "trailId"}. One key per stash is what makes "at most one
// scoped_to link per stash" the server's rule (R13.2): ScopeTo creates it
// only if absent. A stash without it is global (R13.3).
//
// Names are unique within their scope (R1.4): scoping a stash moves its
// name's reservation from the global names to the trail's in the same
// transaction, which fails with ErrDuplicateName when the trail has a
// stash of that name already. The global name is then free again.

// ScopeTo scopes stash stashID to trail trailID: ErrAlreadyScoped when
// the stash has a scoped_to link already, ErrDuplicateName when the trail
// has a stash of its name, ErrConflict when the stash was renamed
// meanwhile, ErrNotFound when it does not exist. The stash's version does
// not change: scoping is a link, not a change of the stash.
func (t *Table) ScopeTo(stashID, trailID string) error {
	id, err := canonicalID(stashID)
	if err != nil {
		return err
	}
	if trailID == "" || len(trailID) > contract.MaxFieldStringBytes {
		return fmt.Errorf("stash: scope %s: trail id must be 1 to %d bytes: %w", id, contract.MaxFieldStringBytes, ErrInvalidID)
	}
	ctx, cancel := t.ctx()
	defer cancel()
	s, err := t.get(ctx, id)
	if err != nil {
		return err
	}
	name, err := json.Marshal(s.Name)
	if err != nil {
		return fmt.Errorf("stash: encode name of %s: %w", id, err)
	}
	ops, err := putOps(putOf{t.linkKey(id), linkDoc{LinkType: linkScopedTo, StashID: id, TrailID: trailID}, 0},
		putOf{t.nameKey(trailID, s.Name), nameDoc{StashID: id}, 0})
	if err != nil {
		return err
	}
	ops = []contract.TxnOp{
		// The stash still has the name whose reservation moves.
		{Op: contract.OpCheck, Key: t.stashKey(id), Condition: &contract.Condition{Field: "name", Equals: name}},
		ops[0],
		{Op: contract.OpDelete, Key: t.nameKey(globalScope, s.Name)},
		ops[1],
	}
	requestID, err := newID()
	if err != nil {
		return err
	}
	_, err = t.c.Txn(ctx, contract.TxnBody{RequestID: requestID, Ops: ops})
	return scopeError(err, id, trailID)
}

// scopeError maps the failure of ScopeTo's transaction to the op that
// failed.
func scopeError(err error, id, trailID string) error {
	switch {
	case err == nil:
		return nil
	case failedOp(err) == 0:
		return apiError(err, fmt.Sprintf("scope stash %s to trail %q", id, trailID))
	case failedOp(err) == 1 && isConflict(err):
		return fmt.Errorf("stash: scope %s to trail %q: it has a scoped_to link already: %w (%w)", id, trailID, ErrAlreadyScoped, err)
	case failedOp(err) == 3 && isConflict(err):
		return fmt.Errorf("stash: scope %s to trail %q: the trail has a stash of its name: %w (%w)", id, trailID, ErrDuplicateName, err)
	case failedOp(err) >= 0:
		return fmt.Errorf("stash: scope %s to trail %q: the stash changed meanwhile: %w (%w)", id, trailID, ErrConflict, err)
	}
	return fmt.Errorf("stash: scope %s to trail %q: %w", id, trailID, err)
}

// ScopedTo returns the trail stash stashID is scoped to, "" for a global
// stash (R13.5); ErrNotFound when the stash does not exist.
func (t *Table) ScopedTo(stashID string) (string, error) {
	id, err := canonicalID(stashID)
	if err != nil {
		return "", err
	}
	ctx, cancel := t.ctx()
	defer cancel()
	if _, err := t.get(ctx, id); err != nil {
		return "", err
	}
	trail, _, err := t.scope(ctx, id)
	return trail, err
}

// StashesInTrail returns the ids of the stashes scoped to trailID, in
// creation order (R13.6); an empty non-nil slice when none is.
func (t *Table) StashesInTrail(trailID string) ([]string, error) {
	if trailID == "" {
		return nil, fmt.Errorf("stash: trail id is empty: %w", ErrInvalidID)
	}
	ctx, cancel := t.ctx()
	defer cancel()
	return t.stashesInTrail(ctx, trailID)
}

// stashesInTrail scans the links for trailID; the server filters them by
// trailId. Link keys end in the stash id, a UUID v7, so key order is
// creation order.
func (t *Table) stashesInTrail(ctx context.Context, trailID string) ([]string, error) {
	ids := []string{}
	t.declareIndexes(ctx)
	o := client.ScanOptions{Prefix: t.project + scopeDir, Limit: 1000,
		Filter: client.Filter{Field: "trailId", Op: contract.FilterEq, Value: trailID}}
	for e, err := range t.c.ScanAll(ctx, o) {
		if err != nil {
			return nil, apiError(err, "list the stashes of trail "+trailID)
		}
		ids = append(ids, strings.TrimPrefix(e.Key, t.project+scopeDir))
	}
	return ids, nil
}
