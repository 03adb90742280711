package api

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
)

// history serves GET /v1/kv/{key}:history?fromVersion=&limit=&cursor=: a
// page of the key's versions, oldest first, from the projection's
// kv_history. Linearizable like a listing: the key's owner (others
// forward to it) waits until the projection holds every change of the key
// it acknowledged, then one range scan of kv_history's primary key
// answers. The read right on the key was checked (get): every value the
// page carries is one the caller may read.
func (s *Server) history(c echo.Context, _ contract.Op, k contract.Key) error {
	q := c.QueryParams()
	from, err := historyStart(q)
	if err != nil {
		return err
	}
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	st, err := s.w.State(ctx, k)
	if err != nil {
		return err
	}
	if st.Version == 0 {
		return contract.FieldErrorf(contract.ENotFound, "key", "key %s was never written", k.String())
	}
	where, err := s.w.AwaitProjected(ctx, k.String())
	if err != nil {
		return err
	}
	// A page holds up to MaxListBytes of events, as a listing's does, and
	// takes one of the listings' slots while it is in memory.
	release, err := s.takeList(c)
	if err != nil {
		return err
	}
	defer release()
	ctx = c.Request().Context() // names the reader (takeList)
	var versions []contract.HistoryVersion
	var next int64
	at, err := s.readProjected(ctx, where, func(l Lister) (err error) {
		versions, next, err = l.History(ctx, k.String(), from, limit, s.cfg.MaxListBytes)
		return err
	})
	if err != nil {
		return err
	}
	setPosition(c, at)
	a := contract.HistoryAnswer{Key: k.String(), Versions: versions, Position: positionText(at)}
	if next > 0 {
		a.Cursor = strconv.FormatInt(next, 10)
	}
	return c.JSON(http.StatusOK, a)
}

// historyStart is the first version a page of history asks for: the
// cursor (a version the previous page answered) when given, else
// fromVersion (default 1). A cursor continues a walk that began at
// fromVersion, so a request may keep both: the page starts at the later.
func historyStart(q url.Values) (int64, error) {
	from := int64(1)
	for _, name := range []string{"fromVersion", "cursor"} {
		v, ok := q[name]
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || n < 1 {
			if name == "cursor" {
				return 0, contract.FieldErrorf(contract.EInvalid, name, "cursor is not one this history returned")
			}
			return 0, contract.FieldErrorf(contract.EInvalid, name, "fromVersion must be an integer of at least 1")
		}
		from = max(from, n)
	}
	return from, nil
}
