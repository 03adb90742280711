package api

import (
	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// touch serves POST /v1/kv/{key}:touch: a new expiry for the key's entry
// (or none, with persist), its value kept. The answer is the entry after
// it, its value only for a caller that may read the key.
func (s *Server) touch(c echo.Context, _ contract.Op, p *Principal, k contract.Key) error {
	var b contract.TouchBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	return s.writeEntry(c, &decide.KV{Header: decide.Header{Key: k, Op: contract.OpTouch, RequestID: b.RequestID, Principal: p.Name},
		ExpectedVersion: b.ExpectedVersion, TTLSeconds: b.TTL()})
}
