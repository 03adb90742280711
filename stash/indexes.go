package stash

import (
	"context"
	"slices"
	"time"
)

// The fields a stash table's scans compare: a stash's stashType and
// name (Fetch), a scoped_to link's trailId (StashesInTrail). eskv
// indexes only the fields a project declares (docs/api.md, "Filtered
// scans"); a scan of any other field reads the values, a bounded number
// per page, which is right but slower on a large project. So a table
// declares these before its first scan, once, merging them into what the
// project declares already (client.AddFieldIndexes: other declarers'
// fields are kept). Open makes no call (it never did), hence the first
// scan. Declaring needs the write right on the project's declaration
// key; a token without it (scoped to the stash paths only) still scans,
// through the values: the failure is not the caller's.
var scannedFields = []string{"name", "stashType", "trailId"}

// declareTimeout bounds the declaration a first scan makes.
const declareTimeout = 5 * time.Second

// declareIndexes declares scannedFields once per table (see above).
func (t *Table) declareIndexes(ctx context.Context) {
	t.declared.Do(func() {
		ctx, cancel := context.WithTimeout(ctx, declareTimeout)
		defer cancel()
		have, _, err := t.c.FieldIndexes(ctx, t.project)
		if err != nil || !slices.ContainsFunc(scannedFields, func(f string) bool { return !slices.Contains(have, f) }) {
			return
		}
		_, _ = t.c.AddFieldIndexes(ctx, t.project, scannedFields...)
	})
}
