package api

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// getField answers GET /v1/kv/{key}?field=NAME.
func getField(c echo.Context, e *contract.Entry, field string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Value, &fields); err != nil || fields == nil {
		err := contract.FieldErrorf(contract.EWrongType, "field", "key %s does not hold a JSON object", e.Key)
		err.Current = e
		return err
	}
	v, ok := fields[field]
	if !ok {
		return contract.FieldErrorf(contract.ENotFound, "field", "key %s has no field %q", e.Key, field)
	}
	return c.JSON(http.StatusOK, contract.FieldAnswer{Key: e.Key, Version: e.Version, Field: field, Value: v})
}

// patch serves PATCH /v1/kv/{key}.
func (s *Server) patch(c echo.Context, p *Principal, k contract.Key) error {
	var b contract.PatchBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	req, err := s.patchRequest(k, &b, p.Name)
	if err != nil {
		return err
	}
	return s.writeEntry(c, req)
}

// patchRequest is the write of a patch of key k by principal (b valid),
// its values compacted within the value limit. A transaction's patch is
// one.
func (s *Server) patchRequest(k contract.Key, b *contract.PatchBody, principal string) (*decide.KV, error) {
	req := &decide.KV{Header: decide.Header{Key: k, Op: contract.OpPatch, RequestID: b.RequestID, Principal: principal}, Create: b.Create, ExpectedVersion: b.ExpectedVersion,
		SpecRef: b.SpecRef, MaxValueBytes: s.cfg.MaxValueBytes,
		Set: make(map[string]json.RawMessage, len(b.Set)), Unset: b.Unset, TTLSeconds: b.TTL(), Semantics: b.EntrySemantics()}
	for f, v := range b.Set {
		if v == nil {
			v = json.RawMessage("null")
		}
		cv, err := codec.CompactValue(v, s.cfg.MaxValueBytes)
		if err != nil {
			var e *contract.Error
			if errors.As(err, &e) {
				e.Field = "set." + f
			}
			return nil, err
		}
		req.Set[f] = cv
	}
	if b.If != nil {
		eq, err := codec.CompactValue(b.If.Equals, s.cfg.MaxValueBytes)
		if err != nil {
			return nil, contract.FieldErrorf(contract.EInvalid, "if.equals", "if.equals: %v", err)
		}
		req.If = &contract.FieldCondition{Field: b.If.Field, Equals: eq}
	}
	return req, nil
}
