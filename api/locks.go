package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// lock serves the lock and leader writes: POST /v1/kv/{key}:acquire,
// :extend, :release, :elect, :heartbeat and :resign.
func (s *Server) lock(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	var b contract.LockBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.ValidateFor(op); err != nil {
		return err
	}
	if err := authorizeSession(p, b.Session); err != nil {
		return err
	}
	release := op.LockAction() == contract.LockRelease
	req := &decide.Lock{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name}, Holder: b.Holder,
		Semantics: b.EntrySemantics(op), SpecRef: b.SpecRef, Session: b.Session}
	if !release && b.Session == "" {
		req.TTLSeconds = b.Lease()
	}
	res, err := s.writeWait(c, req) // acquire's wait (waits.go)
	if err != nil {
		return err
	}
	if release {
		return c.JSON(http.StatusOK, contract.ReleaseAnswer{Key: k.String(), Version: res.Entry.Version, Released: true})
	}
	a, err := decide.LockAnswerOf(&res.Entry)
	if err != nil {
		return err
	}
	a.Reentered = op.LockAction() == contract.LockAcquire && a.Token != a.Version
	return c.JSON(http.StatusOK, a)
}

// checkLock answers GET /v1/kv/{key}:lock and :leader.
func checkLock(c echo.Context, op contract.Op, k contract.Key, e *contract.Entry) error {
	role := op.Purpose()
	if e == nil {
		what := "lock"
		if role == contract.PurposeLeader {
			what = "leader pool"
		}
		return contract.FieldErrorf(contract.ENotFound, "key", "%s %s is free", what, k.String())
	}
	if e.Semantics.Purpose != role {
		err := contract.FieldErrorf(contract.EWrongType, "key", "key %s is a %s entry, not a %s", k.String(), e.Semantics.Purpose, role)
		err.Current = e
		return err
	}
	a, err := decide.LockAnswerOf(e)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}
