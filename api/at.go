package api

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// Reads of the past: GET /v1/kv/{key}?at= and GET /v1/kv?prefix=&at=
// answer from the projection's kv_history (projection.EntryAsOf, PageAsOf,
// which a listing's later pages read too: api/listpage.go) what the key,
// or every key under the prefix, held at a point of its partition's log,
// with the same rights as the reads of today (the caller's read right
// was checked before: get's authorizeKey, readListQuery's AllowsPrefix).
// The answer tells the position it is as of in PositionHeader (and a
// listing in its position field): the one asked, or the one a time
// resolved to. An at= listing's cursor is a listing's (nextListCursor):
// it carries that position, so a page with at and a cursor of another
// position is refused (400 cursor).

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
	where, err := s.w.AwaitProjected(ctx, prefix)
	if err != nil {
		return projection.AsOf{}, err
	}
	off, err := s.list.OffsetAtTime(ctx, where.Partition, *a.time)
	if err != nil {
		return projection.AsOf{}, err
	}
	return projection.AsOf{Partition: where.Partition, Offset: off, Time: a.time}, nil
}

// getAt answers GET /v1/kv/{key}?at=: the key's entry at a (404 when it
// was absent then), for op get's reader (getEntry: ?field= too).
func (s *Server) getAt(c echo.Context, k contract.Key, a *atParam) error {
	e, pos, err := s.entryAt(c, k, a)
	if err != nil {
		return err
	}
	if e == nil {
		return contract.FieldErrorf(contract.ENotFound, "key", "key %s did not exist at %s", k.String(), pos)
	}
	return getEntry(c, contract.OpGet, k, e)
}

// entryAt reads k's entry at a (nil when it was absent then) and tells
// the position it was read at, in the answer's header too: the read of
// the past GET and the status page share.
func (s *Server) entryAt(c echo.Context, k contract.Key, a *atParam) (*contract.Entry, contract.Cursor, error) {
	at, err := s.resolveAt(c, k.String(), a, nil)
	if err != nil {
		return nil, contract.Cursor{}, err
	}
	e, err := s.list.EntryAsOf(c.Request().Context(), k.String(), at)
	if err != nil {
		return nil, contract.Cursor{}, err
	}
	pos := cursorOf(at)
	setPosition(c, &pos)
	return e, pos, nil
}

func cursorOf(at projection.AsOf) contract.Cursor {
	return contract.Cursor{Partition: at.Partition, Offset: at.Offset}
}

// listAt answers GET /v1/kv?prefix=&at= (keysOnly too): a page of the
// entries under the prefix at lq.at, after the cursor's key (whose
// position, that of the listing's first page, every later page is read
// at). Like listKeys, it waits before it takes a listing slot.
func (s *Server) listAt(c echo.Context, lq listQuery) error {
	at, err := s.resolveAt(c, lq.prefix, lq.at, lq.cur.at)
	if err != nil {
		return err
	}
	release, err := s.takeList(c)
	if err != nil {
		return err
	}
	defer release()
	pg := projection.Page{After: lq.cur.after, Limit: lq.limit, MaxBytes: s.cfg.MaxListBytes}
	items, truncated, err := s.list.PageAsOf(c.Request().Context(), lq.prefix, nil, at, pg)
	if err != nil {
		return err
	}
	pos := cursorOf(at)
	next := ""
	if truncated && len(items) > 0 {
		next = nextListCursor(items[len(items)-1].Key, &pos)
	}
	setPosition(c, &pos)
	if lq.keysOnly {
		return c.JSON(http.StatusOK, contract.KeysAnswer{Items: keysOf(items), Count: len(items), Truncated: truncated, NextCursor: next, Position: pos.String()})
	}
	return writeList(c.Response(), contract.ListAnswer{Items: items, Count: len(items), Truncated: truncated, NextCursor: next, Position: pos.String()})
}

// checkAtQuery refuses, in a listing at a past point (at): a filter,
// since kv_fields, which filtered listings read, indexes the current
// values only; and a cursor without a position (of a release before
// positions), which no such listing returned: its cursors carry the
// position its pages are read at.
func checkAtQuery(lq listQuery) error {
	if lq.at == nil {
		return nil
	}
	if lq.filter != nil {
		return contract.FieldErrorf(contract.EInvalid, "field", "a listing filtered on field %q cannot be read at a past point (at): "+
			"only current values are indexed by field; list without the filter and filter the page", lq.filter.Field)
	}
	if lq.cur.after != "" && lq.cur.at == nil {
		return contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is not one this listing returned (a listing at a past point answers cursors that carry its position)")
	}
	return nil
}
