package stash

import (
	"encoding/json"
	"fmt"

	"github.com/eskv/eskv/client"
)

// History returns the versions of stash id, oldest first (R7): for each
// persisted change its history id, version, value, operation, the crumb
// that made it (Table.ChangedBy) and the time eskv recorded it. It reads
// the stash key's history (GET /v1/kv/{key}:history), which eskv keeps
// for every key; the stash document of each version names the operation
// and history id. A deleted stash has no history here (ErrNotFound,
// R11.2): ids are never reused, so the key's versions after a delete are
// only ever its old ones. eskv's ESKV_HISTORY_RETENTION, when set, may
// have removed the oldest versions.
func (t *Table) History(id string) ([]StashHistoryEntry, error) {
	id, err := canonicalID(id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := t.ctx()
	defer cancel()
	if _, err := t.get(ctx, id); err != nil {
		return nil, err
	}
	entries := []StashHistoryEntry{}
	for v, err := range t.c.History(ctx, t.stashKey(id), client.HistoryOptions{Limit: 1000}) {
		if err != nil {
			return nil, apiError(err, "read the history of stash "+id)
		}
		if v.Value == nil {
			// The stash was deleted after it was read above: it has no
			// history any more.
			return nil, fmt.Errorf("stash: history of %s: deleted meanwhile: %w", id, ErrNotFound)
		}
		e, err := historyEntry(id, v)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// historyEntry is the stash history entry of one version of its key.
func historyEntry(id string, v client.HistoryVersion) (StashHistoryEntry, error) {
	var d doc
	if err := json.Unmarshal(v.Value, &d); err != nil {
		return StashHistoryEntry{}, fmt.Errorf("stash: version %d of stash %s is not a stash document: %w", v.Version, id, err)
	}
	value, err := decodeValue(d.Value)
	if err != nil {
		return StashHistoryEntry{}, fmt.Errorf("stash: version %d of stash %s: %w", v.Version, id, err)
	}
	return StashHistoryEntry{HistoryID: d.HistoryID, Version: v.Version, Value: value, Operation: d.Op,
		ChangedBy: d.ChangedBy, CreatedAt: v.TS}, nil
}
