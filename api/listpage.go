package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/writer"
)

// A listing's pages are one snapshot: the first page answers the position
// its snapshot reflects (readProjected), and its nextCursor carries that
// position beside the last key, so every later page answers as of it
// (projection.Store.PageAsOf, as a read at= reads the past), whatever was written meanwhile. The cursor's
// text is <position>.<last key, base64url>, e.g. p3.o1041.dGVuYW50L2Eu…;
// base64url has no '.', so the last '.' splits them. A cursor of a
// release before positions (the key alone, no '.') is still accepted: its
// page answers as of the latest position, as every page did then, and
// tells that position.

// listCursor is a listing's cursor parsed: the key its previous page
// ended at, and the position of its first page (nil in an old cursor).
type listCursor struct {
	after string
	at    *contract.Cursor
}

// parseListCursor parses the cursor v of a listing of prefix ("" for the
// first page).
func parseListCursor(v, prefix string) (listCursor, error) {
	bad := contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is not one this listing returned")
	if v == "" {
		return listCursor{}, nil
	}
	var out listCursor
	keyPart := v
	if i := strings.LastIndexByte(v, '.'); i >= 0 {
		at, err := contract.ParseCursor(v[:i], "cursor")
		if err != nil {
			return listCursor{}, bad
		}
		out.at, keyPart = &at, v[i+1:]
	}
	b, err := base64.RawURLEncoding.DecodeString(keyPart)
	if err == nil {
		_, err = contract.ParseKey(string(b)) // a cursor is the last key of a page
	}
	if err != nil || !bytes.HasPrefix(b, []byte(prefix)) {
		return listCursor{}, bad
	}
	out.after = string(b)
	return out, nil
}

// nextListCursor is the cursor of the page after the one that ended at
// key, of a listing whose first page answered as of at.
func nextListCursor(key string, at *contract.Cursor) string {
	k := base64.RawURLEncoding.EncodeToString([]byte(key))
	if at == nil {
		return k
	}
	return at.String() + "." + k
}

// listRead is one page of a listing: its prefix, filter (nil: none),
// page, and the position of its first page (nil: this is one, or an old
// cursor's).
type listRead struct {
	prefix string
	filter *projection.Filter
	page   projection.Page
	at     *contract.Cursor
}

// listPage reads a page of a listing in one snapshot of the projection.
// A first page (or an old cursor's) reads the projection as it is and
// answers its snapshot's position. A later page answers as of its
// cursor's position: as the projection is when nothing was projected
// since, else from the history (PageAsOf: a version the retention
// removed is snapshot_expired, list again); a position past the
// projection's, or of another partition, is no cursor this listing
// returned (a projection rebuilt or reset since answers
// snapshot_expired: list again).
func (s *Server) listPage(ctx context.Context, where writer.Projected, r listRead) (contract.ListAnswer, error) {
	if r.at != nil && r.at.Partition != where.Partition {
		return contract.ListAnswer{}, contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is not one this listing returned")
	}
	var items []contract.Entry
	var next string
	now, err := s.readProjected(ctx, where, func(l Lister) (err error) {
		items, next, err = readListPage(ctx, l, r, where)
		return err
	})
	if err != nil {
		return contract.ListAnswer{}, err
	}
	at := now
	if r.at != nil && now != nil {
		at = r.at
	}
	a := contract.ListAnswer{Items: items, Count: len(items), Truncated: next != "", Position: positionText(at)}
	if next != "" {
		a.NextCursor = nextListCursor(next, at)
	}
	return a, nil
}

// readListPage reads r's page with l, a view of one snapshot (or a
// Lister without snapshots, which reads the latest state), and the key
// the next page starts after ("" when there is none): the page's last
// key, or, for a scan without an index whose budget ran out, the last
// key it read (projection.Store.Scan).
func readListPage(ctx context.Context, l Lister, r listRead, where writer.Projected) ([]contract.Entry, string, error) {
	if items, truncated, past, err := readPastPage(ctx, l, r, where); past || err != nil {
		return items, lastKeyIf(items, truncated), err
	}
	if r.filter != nil {
		return l.Scan(ctx, r.prefix, *r.filter, r.page)
	}
	items, truncated, err := l.List(ctx, r.prefix, r.page)
	return items, lastKeyIf(items, truncated), err
}

// lastKeyIf is the key of the last of items when truncated, else "".
func lastKeyIf(items []contract.Entry, truncated bool) string {
	if !truncated || len(items) == 0 {
		return ""
	}
	return items[len(items)-1].Key
}

// readKeysPage is readListPage of a keys-only listing: Lister.Keys, or,
// for a later page when the projection moved on since its first, the
// page as of the first page's position with the values dropped (whose
// sizes then count in the byte budget, as in a listing's page).
func readKeysPage(ctx context.Context, l Lister, r listRead, where writer.Projected) ([]contract.KeyInfo, bool, error) {
	items, truncated, past, err := readPastPage(ctx, l, r, where)
	if err != nil {
		return nil, false, err
	}
	if !past {
		return l.Keys(ctx, r.prefix, r.page)
	}
	return keysOf(items), truncated, nil
}

// keysOf is a keys-only page of entries: their values dropped.
func keysOf(items []contract.Entry) []contract.KeyInfo {
	keys := make([]contract.KeyInfo, len(items))
	for i, e := range items {
		keys[i] = contract.KeyInfo{Key: e.Key, Version: e.Version, Purpose: e.Semantics.Purpose, ExpiresAt: e.ExpiresAt}
	}
	return keys
}

// readPastPage reads a later page of r as of its first page's position
// when the projection has moved on since (past: the page is read), and
// refuses one whose projection is behind that position (rebuilt or reset
// since). Otherwise (a first page, an old cursor's, a Lister without
// snapshots, nothing projected since) the caller reads the projection as
// it is.
func readPastPage(ctx context.Context, l Lister, r listRead, where writer.Projected) (items []contract.Entry, truncated, past bool, err error) {
	v, ok := l.(*projection.Store)
	if !ok || r.at == nil {
		return nil, false, false, nil
	}
	pos, err := v.Position(ctx, where.Topic, where.Partition)
	if err != nil {
		return nil, false, false, err
	}
	switch {
	case pos < r.at.Offset:
		return nil, false, false, &contract.Error{Code: contract.ESnapshotExpired,
			Message: "the projection is behind the position of this listing's first page (rebuilt or reset since); list again from the first page"}
	case pos > r.at.Offset:
		at := projection.AsOf{Partition: r.at.Partition, Offset: r.at.Offset, Time: &r.page.Now, Snapshot: true}
		items, truncated, err = v.PageAsOf(ctx, r.prefix, r.filter, at, r.page)
		return items, truncated, true, err
	}
	return nil, false, false, nil
}
