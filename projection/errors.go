package projection

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eskv/eskv/events"
)

// translate turns a driver error into the vocabulary of events.Error, so
// nothing above this package imports pgx: Postgres being unreachable,
// overloaded or shutting down, and serialization failures, are
// partition_unavailable (retry later); anything else is internal. Context
// errors stay themselves (errors.Is works) so callers tell a cancel from a
// failure.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("projection: %s: %w", op, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		msg := fmt.Sprintf("projection: %s: postgres error %s: %s", op, pgErr.Code, pgErr.Message)
		if retriable(pgErr.Code) {
			return &events.Error{Code: events.EUnavailable, Message: msg, RetryAfterSeconds: 1}
		}
		return &events.Error{Code: events.EInternal, Message: msg}
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return &events.Error{
			Code:              events.EUnavailable,
			Message:           fmt.Sprintf("projection: %s: postgres unavailable: %v", op, err),
			RetryAfterSeconds: 1,
		}
	}
	return &events.Error{Code: events.EInternal, Message: fmt.Sprintf("projection: %s: %v", op, err)}
}

// retriable reports SQLSTATEs after which the same statement may succeed
// later: connection exceptions (08), insufficient resources (53), operator
// intervention such as shutdown (57P), serialization failure and deadlock.
func retriable(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") || strings.HasPrefix(code, "57P") ||
		code == "40001" || code == "40P01"
}
