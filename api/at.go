package api

import (
	"encoding/base64"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// Reads of the past: GET /v1/kv/{key}?at= and GET /v1/kv?prefix=&at=
// answer from the projection's kv_history (projection.EntryAsOf, PageAsOf)
// what the key, or every key under the prefix, held at a point of its
// partition's log, with the same rights as the reads of today (the
// caller's read right was checked before: get's authorizeKey, listKeys'
// AllowsPrefix). The answer says the position it is as of in
// positionHeader.

// positionHeader names the position (a watch cursor's text) a read of
// the past is answered as of: the one asked, or the one a time resolved
// to.
const positionHeader = "Eskv-Position"

// atParam is the at query parameter: a position or a time.
type atParam struct {
	pos  *contract.Cursor
	time *time.Time
}

// parseAt reads the at parameter of q (nil when absent): a watch cursor's
// text (p<partition>.o<offset>) or an RFC 3339 time.
func parseAt(q url.Values) (*atParam, error) {
	v, ok := q["at"]
	if !ok {
		return nil, nil
	}
	if strings.HasPrefix(v[0], "p") {
		c, err := contract.ParseCursor(v[0], "at")
		if err != nil {
			return nil, err
		}
		return &atParam{pos: &c}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v[0])
	if err != nil {
		return nil, contract.FieldErrorf(contract.EInvalid, "at", "at %q is neither a position (p<partition>.o<offset>, a watch cursor) nor an RFC 3339 time", v[0])
	}
	return &atParam{time: &t}, nil
}

// resolveAt is the point of prefix's partition a read at a answers at,
// once the projection holds every event the read needs: a position as
// given (from, a listing cursor's position, in its place; a cursor of
// another position is refused), or the
// position a time resolves to (projection.Store.OffsetAtTime) after every
// acknowledged write under prefix is projected. A time after now is
// refused: what it names is not written yet.
func (s *Server) resolveAt(c echo.Context, prefix string, a *atParam, from *contract.Cursor) (projection.AsOf, error) {
	ctx := c.Request().Context()
	pos := a.pos
	if from != nil {
		if pos != nil && *pos != *from {
			return projection.AsOf{}, contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is of a listing at %s, not at %s", from, pos)
		}
		pos = from
	}
	if pos != nil {
		if err := s.w.AwaitPosition(ctx, prefix, *pos); err != nil {
			return projection.AsOf{}, err
		}
		return projection.AsOf{Partition: pos.Partition, Offset: pos.Offset, Time: a.time}, nil
	}
	if now := s.now(); a.time.After(now) {
		return projection.AsOf{}, contract.FieldErrorf(contract.EInvalid, "at", "at %s is in the future (now is %s)",
			a.time.Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano))
	}
	if err := s.w.AwaitProjected(ctx, prefix); err != nil {
		return projection.AsOf{}, err
	}
	part := s.w.PartitionOf(prefix)
	off, err := s.list.OffsetAtTime(ctx, part, *a.time)
	if err != nil {
		return projection.AsOf{}, err
	}
	return projection.AsOf{Partition: part, Offset: off, Time: a.time}, nil
}

// getAt answers GET /v1/kv/{key}?at=: the key's entry at a (404 when it
// was absent then), for op get's reader (getEntry: ?field= too).
func (s *Server) getAt(c echo.Context, k contract.Key, a *atParam) error {
	at, err := s.resolveAt(c, k.String(), a, nil)
	if err != nil {
		return err
	}
	e, err := s.list.EntryAsOf(c.Request().Context(), k.String(), at)
	if err != nil {
		return err
	}
	c.Response().Header().Set(positionHeader, cursorOf(at).String())
	if e == nil {
		return contract.FieldErrorf(contract.ENotFound, "key", "key %s did not exist at %s", k.String(), cursorOf(at))
	}
	return getEntry(c, contract.OpGet, k, e)
}

func cursorOf(at projection.AsOf) contract.Cursor {
	return contract.Cursor{Partition: at.Partition, Offset: at.Offset}
}

// listAt answers GET /v1/kv?prefix=&at=: a page of the entries under
// prefix at a, after the key after (from: the position of the listing's
// first page, which its cursors carry so that every page is read at
// it). Like listKeys, it waits before it takes a listing slot.
func (s *Server) listAt(c echo.Context, prefix string, a *atParam, from *contract.Cursor, pg projection.Page) error {
	at, err := s.resolveAt(c, prefix, a, from)
	if err != nil {
		return err
	}
	release, err := s.takeList(c)
	if err != nil {
		return err
	}
	defer release()
	items, truncated, err := s.list.PageAsOf(c.Request().Context(), prefix, at, pg)
	if err != nil {
		return err
	}
	ans := contract.ListAnswer{Items: items, Count: len(items), Truncated: truncated}
	if truncated && len(items) > 0 {
		ans.NextCursor = atCursor(cursorOf(at), items[len(items)-1].Key)
	}
	c.Response().Header().Set(positionHeader, cursorOf(at).String())
	return writeList(c.Response(), ans)
}

// atCursor is the cursor of an at= listing's next page: the page's
// position and its last key, "p<partition>.o<offset> <key>" (keys hold
// no space), in base64url like a listing's cursor (the last key alone).
func atCursor(pos contract.Cursor, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(pos.String() + " " + key))
}

// pastCursor reads a listing's cursor v (the key after which the page
// starts, "" for the first page): for an at= listing (at), an atCursor,
// whose position it returns as well; else a key. Either way the key is
// under prefix, and a cursor of the other kind is refused.
func pastCursor(v, prefix string, at bool) (string, *contract.Cursor, error) {
	if v == "" {
		return "", nil, nil
	}
	bad := contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is not one this listing returned")
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return "", nil, bad
	}
	key, pos := string(b), (*contract.Cursor)(nil)
	if at {
		posText, k, ok := strings.Cut(key, " ")
		c, err := contract.ParseCursor(posText, "cursor")
		if !ok || err != nil {
			return "", nil, bad
		}
		key, pos = k, &c
	}
	if _, err := contract.ParseKey(key); err != nil || !strings.HasPrefix(key, prefix) {
		return "", nil, bad
	}
	return key, pos, nil
}

// checkAtFilter refuses a filtered listing at a past point: kv_fields,
// which filtered listings read, indexes the current values only.
func checkAtFilter(f *contract.Filter, a *atParam) error {
	if f == nil || a == nil {
		return nil
	}
	return contract.FieldErrorf(contract.EInvalid, "field", "a listing filtered on field %q cannot be read at a past point (at): "+
		"only current values are indexed by field; list without the filter and filter the page", f.Field)
}
