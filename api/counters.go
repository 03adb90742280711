package api

import (
	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// increment serves POST /v1/kv/{key}:increment.
func (s *Server) increment(c echo.Context, _ contract.Op, p *Principal, k contract.Key) error {
	var b contract.IncrementBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	return s.writeEntry(c, incrementRequest(k, &b, p.Name))
}

// incrementRequest is the write of an increment of key k by principal
// (b valid). A transaction's increment is one.
func incrementRequest(k contract.Key, b *contract.IncrementBody, principal string) *decide.KV {
	return &decide.KV{Header: decide.Header{Key: k, Op: contract.OpIncrement, RequestID: b.RequestID, Principal: principal}, By: b.Step(), Min: b.Min, Max: b.Max, Create: b.Create,
		ExpectedVersion: b.ExpectedVersion, TTLSeconds: b.TTL(), Semantics: b.EntrySemantics(), SpecRef: b.SpecRef}
}
