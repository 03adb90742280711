package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// session serves the session writes (docs/sessions.md): POST
// /v1/kv/{key}:session creates a session with a TTL, :keepalive renews
// it, :revoke ends it with the keys, locks and leaderships attached to
// it. The answer is the session after the write (for a revoke, the keys
// its end deleted or released).
func (s *Server) session(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	req := &decide.KV{Header: decide.Header{Key: k, Op: op, Principal: p.Name}}
	if op == contract.OpSessionCreate {
		var b contract.SessionBody
		if err := s.decode(c, &b); err != nil {
			return err
		}
		if err := b.Validate(); err != nil {
			return err
		}
		req.RequestID, req.TTLSeconds, req.SpecRef, req.ExpectedVersion = b.RequestID, b.TTLSeconds, b.SpecRef, new(int64)
	} else {
		var b contract.SessionWriteBody
		if err := s.decode(c, &b); err != nil {
			return err
		}
		if err := b.Validate(); err != nil {
			return err
		}
		req.RequestID, req.ExpectedVersion = b.RequestID, b.ExpectedVersion
	}
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	a := res.Session
	if a.Key == "" { // a replay: the entry the retried write left
		if a, err = decide.SessionOf(k, &res.Entry); err != nil || op == contract.OpSessionRevoke {
			a = contract.SessionAnswer{Key: k.String(), Version: res.Entry.Version, Attached: []contract.Attachment{}, Revoked: op == contract.OpSessionRevoke}
		}
	}
	return c.JSON(http.StatusOK, a)
}

// authorizeSession checks that the caller may write the session a write
// attaching its key names (the attach rewrites the session's entry).
func authorizeSession(p *Principal, session string) error {
	if session != "" && !p.Allows(Write, session) {
		return contract.FieldErrorf(contract.EForbidden, "session", "principal %s may not %s %s", p.Name, Write, session)
	}
	return nil
}
