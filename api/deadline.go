package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
)

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 5 * time.Second

// streams are the routes that answer for as long as their client
// listens: no request deadline.
var streams = map[string]bool{"/v1/watch": true, "/ui/api/watch": true}

// withDeadline bounds the request of ec, a route found, by
// Config.RequestTimeout, whatever a dependency does: every wait of its
// handler (the writer's answer, a broker's, Postgres's) ends with its
// context. The returned function releases the deadline's timer. Streams
// are not bounded.
func (s *Server) withDeadline(ec echo.Context) context.CancelFunc {
	if s.cfg.RequestTimeout <= 0 || streams[ec.Path()] {
		return func() {}
	}
	r := ec.Request()
	// A blocking wait (waits.go) is on top of the request's own time.
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout+requestedWait(ec))
	ec.SetRequest(r.WithContext(ctx))
	return cancel
}

// pastDeadline is err as the answer of request r once its deadline
// passed: the one place the deadline's end becomes an answer. A write the
// writer was handed answers outcome_unknown already (writer.Writer.Do:
// only it knows the write was queued); anything else the deadline ended
// (a read, a write refused before it was queued, a driver's context
// error) is partition_unavailable: nothing was written, retry. An answer
// about the request itself (invalid, not_found, a conflict) is kept.
func pastDeadline(r *http.Request, err error) error {
	if !errors.Is(r.Context().Err(), context.DeadlineExceeded) {
		return err
	}
	switch contract.ErrorCode(err) {
	case contract.EInternal, contract.EUnavailable:
		return &contract.Error{Code: contract.EUnavailable, RetryAfterSeconds: 1,
			Message: "the request was not answered within the server's request deadline (a dependency is slow or unreachable); retry"}
	}
	return err
}
