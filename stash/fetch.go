package stash

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// fetchFilter is a Fetch filter map, parsed (R9.2).
type fetchFilter struct {
	stashType, name *string
	// trail restricts to the stashes scoped to it (the PRD's R10.1
	// example's "trail_id"; R9.2.1's links query done for the caller).
	trail         *string
	limit, offset int
}

// Fetch returns the stashes that match filter, each a *Stash, ordered by
// CreatedAt ascending (ties by StashID, which is time-ordered too), and an
// empty non-nil slice when none does (R9, R10). Filter keys: "stash_type"
// and "name" (exact match), "limit" (0: no limit), "offset", and as an
// extension "trail_id" (the stashes scoped to that trail); keys are
// ANDed, unknown keys ignored. A string filter may be given as a string or
// a *string (nil: no filter). The server filters by stash_type or name
// (a filtered scan of the project's stash keys); sorting and paging are
// done here, over the matches.
func (t *Table) Fetch(filter map[string]any) ([]any, error) {
	f, err := parseFilter(filter)
	if err != nil {
		return nil, err
	}
	if f.stashType != nil && !validType(*f.stashType) {
		return []any{}, nil // no stash has it
	}
	ctx, cancel := t.ctx()
	defer cancel()
	var trailIDs map[string]bool
	if f.trail != nil {
		ids, err := t.stashesInTrail(ctx, *f.trail)
		if err != nil {
			return nil, err
		}
		trailIDs = make(map[string]bool, len(ids))
		for _, id := range ids {
			trailIDs[id] = true
		}
	}
	var found []*Stash
	for e, err := range t.entries(ctx, f) {
		if err != nil {
			return nil, apiError(err, "fetch stashes")
		}
		id := strings.TrimPrefix(e.Key, t.project+stashDir)
		s, err := stashOf(id, e)
		if err != nil {
			return nil, err
		}
		if f.matches(s) && (trailIDs == nil || trailIDs[id]) {
			found = append(found, s)
		}
	}
	return page(found, f), nil
}

// entries yields the stash entries that may match f: a scan filtered by
// the server on stashType or name when f has one (a name longer than the
// server indexes is matched here), else all of the project's stashes.
func (t *Table) entries(ctx context.Context, f fetchFilter) iter.Seq2[contract.Entry, error] {
	prefix := t.project + stashDir
	if f.stashType != nil || f.name != nil {
		t.declareIndexes(ctx)
	}
	switch {
	case f.stashType != nil:
		return t.c.ScanAll(ctx, client.ScanOptions{Prefix: prefix, Limit: 1000,
			Filter: client.Filter{Field: "stashType", Op: contract.FilterEq, Value: *f.stashType}})
	case f.name != nil && len(*f.name) <= contract.MaxFieldStringBytes:
		return t.c.ScanAll(ctx, client.ScanOptions{Prefix: prefix, Limit: 1000,
			Filter: client.Filter{Field: "name", Op: contract.FilterEq, Value: *f.name}})
	}
	return t.c.ListAll(ctx, client.ListOptions{Prefix: prefix, Limit: 1000})
}

// matches reports whether s passes f's stash_type and name.
func (f fetchFilter) matches(s *Stash) bool {
	return (f.stashType == nil || s.StashType == *f.stashType) && (f.name == nil || s.Name == *f.name)
}

// page sorts the matches by CreatedAt and applies offset and limit.
func page(found []*Stash, f fetchFilter) []any {
	slices.SortFunc(found, func(a, b *Stash) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.StashID, b.StashID)
	})
	found = found[min(f.offset, len(found)):]
	if f.limit > 0 && f.limit < len(found) {
		found = found[:f.limit]
	}
	out := make([]any, len(found))
	for i, s := range found {
		out[i] = s
	}
	return out
}

// parseFilter reads the keys Fetch knows; a known key with a value of
// the wrong type is ErrInvalidFilter.
func parseFilter(m map[string]any) (fetchFilter, error) {
	var f fetchFilter
	var err error
	for key, dst := range map[string]**string{"stash_type": &f.stashType, "name": &f.name, "trail_id": &f.trail} {
		if *dst, err = stringFilter(m, key); err != nil {
			return f, err
		}
	}
	for key, dst := range map[string]*int{"limit": &f.limit, "offset": &f.offset} {
		v, ok := m[key]
		if !ok || v == nil {
			continue
		}
		n, ok := asInt64(v)
		if !ok || n < 0 || n > int64(^uint(0)>>1) {
			return f, fmt.Errorf("stash: filter %q is %v, not a non-negative integer: %w", key, v, ErrInvalidFilter)
		}
		*dst = int(n)
	}
	return f, nil
}

// stringFilter is the string filter key of m: absent or a nil *string is
// no filter.
func stringFilter(m map[string]any, key string) (*string, error) {
	switch v := m[key].(type) {
	case nil:
		return nil, nil
	case string:
		return &v, nil
	case *string:
		return v, nil
	default:
		return nil, fmt.Errorf("stash: filter %q is a %T, not a string: %w", key, v, ErrInvalidFilter)
	}
}
