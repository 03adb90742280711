package api

import (
	"encoding/base64"
	"net/http"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// Sets (docs/collections.md). Members are data of any content, so they
// travel in the body (sadd, srem) or a query parameter (sismember),
// never in the path.

// setMember serves POST /v1/kv/{key}:sadd and :srem.
func (s *Server) setMember(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	var b contract.MemberBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	req := &decide.Set{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name}, Member: b.Member,
		ExpectedVersion: b.ExpectedVersion, TTLSeconds: b.TTL()}
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	if res.Entry.Key == "" {
		res.Entry.Key = k.String()
	}
	a := decide.SetAnswer(op, res)
	if !mayRead(c, k.String()) {
		// Whether the member was there, and the set's size, are read
		// answers: a write-only caller learns neither.
		a.Added, a.Removed, a.Size = nil, nil, 0
	}
	return c.JSON(http.StatusOK, a)
}

// isMember serves GET /v1/kv/{key}:sismember?member=.
func (s *Server) isMember(c echo.Context, _ contract.Op, k contract.Key) error {
	member, ok := c.QueryParams()["member"]
	if !ok {
		return contract.FieldErrorf(contract.EInvalid, "member", "sismember needs the member query parameter")
	}
	if err := contract.ValidateMember("member", member[0]); err != nil {
		return err
	}
	st, elem, err := s.w.Member(c.Request().Context(), k, member[0])
	if err != nil {
		return err
	}
	a, err := decide.ReadIsMember(k, st.Visible(s.now()), elem)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

// members serves GET /v1/kv/{key}:smembers?limit=&cursor=: a page of
// members in byte order, linearizable like a listing (the owner waits
// until the projection holds every change of the set it acknowledged,
// then one query answers).
func (s *Server) members(c echo.Context, _ contract.Op, k contract.Key) error {
	q := c.QueryParams()
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	var after string
	if v := q.Get("cursor"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || !utf8.Valid(b) || len(b) > contract.MaxMemberBytes {
			return contract.FieldErrorf(contract.EInvalid, "cursor", "cursor is not one this listing returned")
		}
		after = string(b)
	}
	ctx := c.Request().Context()
	st, err := s.w.State(ctx, k)
	if err != nil {
		return err
	}
	if _, err := decide.ReadCard(k, st.Visible(s.now())); err != nil {
		return err // not a set
	}
	where, err := s.w.AwaitProjected(ctx, k.String())
	if err != nil {
		return err
	}
	release, err := s.takeList(c) // a page in memory until it is answered
	if err != nil {
		return err
	}
	defer release()
	ctx = c.Request().Context() // names the reader (takeList)
	var members []string
	var next string
	at, err := s.readProjected(ctx, where, func(l Lister) (err error) {
		members, next, err = l.Members(ctx, k.String(), after, limit, s.now())
		return err
	})
	if err != nil {
		return err
	}
	setPosition(c, at)
	a := contract.MembersAnswer{Set: k.String(), Members: members, Position: positionText(at)}
	if next != "" {
		a.Cursor = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	return c.JSON(http.StatusOK, a)
}
