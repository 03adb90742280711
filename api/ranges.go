package api

import (
	"bytes"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// Writes of a prefix: their paths, and their echo routes (a ':' in an
// echo route starts a parameter unless escaped).
const (
	deleteRangePath  = "/v1/kv:deleteRange"
	deleteRangeRoute = `/v1/kv\:deleteRange`
	expireDuePath    = "/v1/kv:expireDue"
	expireDueRoute   = `/v1/kv\:expireDue`
)

// maxRangeBodyBytes bounds the body of a prefix write: a prefix and a
// cursor of contract.MaxKeyLen characters fit many times over.
const maxRangeBodyBytes = 4 << 10

// deleteRange serves POST /v1/kv:deleteRange (contract.DeleteRangeBody):
// every key under the prefix deleted in one transaction of delete
// events, or refused too_many_keys beyond contract.MaxRangeKeys unless
// chunked. It needs the write right on every key under the prefix; the
// prefix's owner decides (decide.Range), forwarded like any write of the
// project.
func (s *Server) deleteRange(c echo.Context) error {
	var b contract.DeleteRangeBody
	if err := s.readRange(c, contract.OpDeleteRange, &b, func() error { return b.Validate() }, &b.Prefix); err != nil {
		return err
	}
	return s.writeRange(c, &decide.Range{Header: decide.Header{Key: scopeKey(b.Prefix), Op: contract.OpDeleteRange},
		Prefix: b.Prefix, After: b.Cursor, Chunked: b.Chunked})
}

// expireDue serves POST /v1/kv:expireDue (contract.ExpireDueBody): the
// keys under the prefix past their expiry expired now, with the
// sweeper's expire events, at most contract.MaxRangeKeys per call. It
// needs the write right on every key under the prefix.
func (s *Server) expireDue(c echo.Context) error {
	var b contract.ExpireDueBody
	if err := s.readRange(c, contract.OpExpireDue, &b, func() error { return b.Validate() }, &b.Prefix); err != nil {
		return err
	}
	return s.writeRange(c, &decide.Range{Header: decide.Header{Key: scopeKey(b.Prefix), Op: contract.OpExpireDue},
		Prefix: b.Prefix, After: b.Cursor, Chunked: true})
}

// readRange decodes and validates the body of a prefix write op into b
// and checks the caller's right to write every key under its prefix (a
// refusal's log line names the prefix; the audit trail records refused
// writes of keys only, so not this one); the body is kept for the owner,
// when the request is forwarded.
func (s *Server) readRange(c echo.Context, op contract.Op, b any, validate func() error, prefix *string) error {
	if err := noQuery(c); err != nil {
		return err
	}
	body, err := decodeBody(c, b, maxRangeBodyBytes)
	if err != nil {
		return err
	}
	if err := validate(); err != nil {
		return err
	}
	p := principalOf(c)
	if !p.AllowsPrefix(Write, *prefix) {
		c.Set(txnDeniedKey, txnDenied{op: op, key: *prefix}) // write false: logged, not audited
		return contract.FieldErrorf(contract.EForbidden, "prefix", "principal %s may not write every key under %s", p.Name, *prefix)
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(body))
	return nil
}

// writeRange has the prefix's owner decide r (forwarded when another
// writer owns it) and answers its count.
func (s *Server) writeRange(c echo.Context, r *decide.Range) error {
	if done, err := s.forward(c, r.Key); done {
		return err
	}
	r.Principal = principalOf(c).Name
	if err := setDirective(c, r); err != nil {
		return err
	}
	res, err := s.w.Do(c.Request().Context(), r)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res.Prefix)
}
