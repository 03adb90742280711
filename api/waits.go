package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/writer"
)

// Blocking waits (docs/collections.md "Blocking waits",
// docs/design-notes/waits.md): :qpop, :lpop, :rpop and :acquire take
// ?wait=, up to contract.MaxWait. The writer that owns the key holds the
// request (writer.Writer.DoWait) until an item arrives or the lock is
// granted in arrival order, or the wait ends (then it answers as without
// a wait: 404 queue_empty or not_found, 409 lock_held). A waiting request
// holds a slot of MaxWaiters, and of its principal's share
// MaxWaitersPerPrincipal, for as long as it waits.

// Defaults of Config's waiters' bounds.
const (
	DefaultMaxWaiters             = 10000
	DefaultMaxWaitersPerPrincipal = 64
)

// The settings of the waiters' bounds, as refusals name them.
const (
	SettingMaxWaiters             = "ESKV_MAX_WAITERS"
	SettingMaxWaitersPerPrincipal = "ESKV_MAX_WAITERS_PER_PRINCIPAL"
)

// waitReserve is the part of a waiting request's deadline kept for what
// follows its wait: the decision after it and the answer.
const waitReserve = 2 * time.Second

// requestedWait is the wait a request asks, when it is a POST of an op
// that waits with a valid wait: withDeadline extends its deadline by it.
// An invalid wait is refused by the handler (waitOf).
func requestedWait(ec echo.Context) time.Duration {
	r := ec.Request()
	if r.Method != http.MethodPost {
		return 0
	}
	v, ok := queryOf(ec)[contract.WaitParam]
	if !ok {
		return 0
	}
	if _, verb := splitVerb(ec); verb == "" {
		return 0
	} else if op, _, ok := opOf(verb, false); !ok || !contract.Waits(op) {
		return 0
	}
	d, err := contract.ParseWait(v[0])
	if err != nil {
		return 0
	}
	return d
}

// waitOf reads the wait of a request (0 without one) and bounds it by
// the request's deadline, less waitReserve.
func waitOf(c echo.Context) (time.Duration, error) {
	v, ok := queryOf(c)[contract.WaitParam]
	if !ok {
		return 0, nil
	}
	if len(v) > 1 {
		return 0, contract.FieldErrorf(contract.EInvalid, contract.WaitParam, "wait is given more than once")
	}
	d, err := contract.ParseWait(v[0])
	if err != nil {
		return 0, err
	}
	if dl, ok := c.Request().Context().Deadline(); ok {
		d = min(d, time.Until(dl)-waitReserve)
	}
	return max(d, 0), nil
}

// writeWait is write for an op that may wait: with a wait, it takes a
// waiter's slot (429 beyond the principal's share or the writer's
// bound) and has the writer hold the request until it can be decided
// otherwise than empty or held, or the wait ends.
func (s *Server) writeWait(c echo.Context, req decide.Command) (writer.Result, error) {
	if !contract.Waits(req.Head().Op) {
		return s.write(c, req) // extend, release: no wait
	}
	wait, err := waitOf(c)
	if err != nil || wait == 0 {
		if err != nil {
			return writer.Result{}, err
		}
		return s.write(c, req)
	}
	if err := checkWrite(c, req); err != nil {
		return writer.Result{}, err
	}
	h := holderOf(c)
	if err := s.limits.waiters.Take(h, 1); err != nil {
		return writer.Result{}, refusal(err, "requests waiting (wait=)")
	}
	defer s.limits.waiters.Release(h, 1)
	res, err := s.w.DoWait(c.Request().Context(), req, wait)
	if err == nil && res.Replayed {
		c.Response().Header().Set("Eskv-Replayed", "true")
	}
	return res, err
}
