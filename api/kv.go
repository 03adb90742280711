package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// getEntry answers GET /v1/kv/{key} (and ?field=NAME: getField).
func getEntry(c echo.Context, _ contract.Op, k contract.Key, e *contract.Entry) error {
	if e == nil {
		return contract.FieldErrorf(contract.ENotFound, "key", "key %s does not exist", k.String())
	}
	if field, ok := queryOf(c)["field"]; ok {
		return getField(c, e, field[0])
	}
	return answerEntry(c, e)
}

func (s *Server) put(c echo.Context, p *Principal, k contract.Key) error {
	var b contract.PutBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	value, err := codec.CompactValue(b.Value, s.cfg.MaxValueBytes)
	if err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	if err := authorizeSession(p, b.Session); err != nil {
		return err
	}
	return s.writeEntry(c, putRequest(k, &b, value, p.Name))
}

// putRequest is the write of a put of key k by principal: b, a valid
// body whose value, compacted, is value. A transaction's put is one.
func putRequest(k contract.Key, b *contract.PutBody, value json.RawMessage, principal string) *decide.KV {
	return &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPut, RequestID: b.RequestID, Principal: principal}, Value: value, ExpectedVersion: b.ExpectedVersion,
		TTLSeconds: b.TTL(), KeepTTL: b.KeepTTL, Semantics: b.EntrySemantics(), SpecRef: b.SpecRef, Session: b.Session}
}

func (s *Server) delete(c echo.Context, p *Principal, k contract.Key) error {
	q := contract.DeleteParams{RequestID: c.QueryParam("requestId")}
	if v := c.QueryParam("expectedVersion"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return contract.FieldErrorf(contract.EInvalid, "expectedVersion", "expectedVersion must be an integer")
		}
		q.ExpectedVersion = &n
	}
	for name := range c.QueryParams() {
		if name != "expectedVersion" && name != "requestId" {
			return contract.FieldErrorf(contract.EInvalid, name, "unknown query parameter %q (expectedVersion, requestId)", name)
		}
	}
	if err := givenOnce(c.QueryParams()); err != nil {
		return err
	}
	if err := q.Validate(); err != nil {
		return err
	}
	res, err := s.write(c, &decide.KV{Header: decide.Header{Key: k, Op: contract.OpDelete, RequestID: q.RequestID, Principal: p.Name}, ExpectedVersion: q.ExpectedVersion})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, contract.DeleteAnswer{Key: k.String(), Version: res.Entry.Version, Deleted: true})
}
