package projection

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/eskv/eskv/contract"
)

// translate turns a driver error into the vocabulary of contract.Error, so
// nothing above this package imports pgx: Postgres being unreachable,
// overloaded or shutting down, and serialization failures, are
// partition_unavailable (retry later); anything else is internal. The
// *contract.Error's message is stable and says nothing of the driver error
// (which names the host, user and database, or quotes the statement's
// input): that error stays in the chain, for logs (Error()) only. Context
// errors stay themselves (errors.Is works) so callers tell a cancel from a
// failure.
func translate(op string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("projection: %s: %w", op, err)
	}
	unavailable := &contract.Error{Code: contract.EUnavailable, Message: "the projection database is unavailable; retry", RetryAfterSeconds: 1}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if retriable(pgErr.Code) {
			return hidden(op, unavailable, err)
		}
		return hidden(op, &contract.Error{Code: contract.EInternal, Message: "internal error"}, err)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return hidden(op, unavailable, err)
	}
	return hidden(op, &contract.Error{Code: contract.EInternal, Message: "internal error"}, err)
}

// hidden returns an error whose *contract.Error (errors.As) is e, the
// answer, and whose text also carries op and cause, for the logs.
func hidden(op string, e *contract.Error, cause error) error {
	return fmt.Errorf("projection: %s: %w: %w", op, e, cause)
}

// retriable reports SQLSTATEs after which the same statement may succeed
// later: connection exceptions (08), insufficient resources (53), operator
// intervention such as shutdown (57P), serialization failure and deadlock,
// and field index declarations that changed under an Apply more often than
// it retries by itself (kv_field_indexes_check: another projector applied
// declarations after a rebalance): its caller retries later.
func retriable(code string) bool {
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") || strings.HasPrefix(code, "57P") ||
		code == "40001" || code == "40P01" || code == errDeclarationsChanged
}
