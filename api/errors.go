package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
)

// statusOf maps error codes to HTTP statuses.
var statusOf = map[string]int{
	contract.EInvalid:              http.StatusBadRequest,
	contract.ETooLarge:             http.StatusRequestEntityTooLarge,
	contract.EUnauthenticated:      http.StatusUnauthorized,
	contract.EForbidden:            http.StatusForbidden,
	contract.ENotFound:             http.StatusNotFound,
	contract.EConflict:             http.StatusConflict,
	contract.ELockHeld:             http.StatusConflict,
	contract.ENotLockHolder:        http.StatusConflict,
	contract.ENotLeader:            http.StatusConflict,
	contract.EWrongType:            http.StatusConflict,
	contract.EFieldMismatch:        http.StatusConflict,
	contract.EOutOfRange:           http.StatusConflict,
	contract.EQueueEmpty:           http.StatusNotFound,
	contract.EStaleReceipt:         http.StatusConflict,
	contract.ETooManyKeys:          http.StatusConflict,
	contract.EUnavailable:          http.StatusServiceUnavailable,
	contract.EOutcomeUnknown:       http.StatusServiceUnavailable,
	contract.ECursorExpired:        http.StatusGone,
	contract.ESnapshotExpired:      http.StatusGone,
	contract.ETooManyWatches:       http.StatusServiceUnavailable,
	contract.ETooManyRequests:      http.StatusTooManyRequests,
	contract.EForwardLoop:          http.StatusServiceUnavailable,
	contract.EInternal:             http.StatusInternalServerError,
	contract.EMethodNotAllowed:     http.StatusMethodNotAllowed,
	contract.EUnsupportedMediaType: http.StatusUnsupportedMediaType,
}

// mayRead reports whether the request's principal may read key.
func mayRead(c echo.Context, key string) bool {
	p := principalOf(c)
	return p != nil && p.Allows(Read, key)
}

// redactedMessages are the messages of answers whose current value (and
// the message naming it or a lock's holder) the caller may not read.
var redactedMessages = map[string]string{
	contract.EConflict:      "the key is not at the expected version",
	contract.EFieldMismatch: "the field does not equal if.equals",
	contract.ELockHeld:      "the lock is held by another holder",
	contract.ENotLockHolder: "the lock is held by another holder",
	contract.ENotLeader:     "another holder leads the pool",
	contract.EWrongType:     "the key's entry does not fit this operation",
	contract.EOutOfRange:    "the result would leave the 64-bit integer range",
}

// withoutValue is an answer about a key's current entry for a principal
// that may not read the key: code, field, version, expiry and
// correlation id, but neither the value nor a message that could name it
// (or a lock's holder).
func withoutValue(d contract.ErrorDetail) contract.ErrorDetail {
	msg, ok := redactedMessages[d.Code]
	bound := d.Field[strings.LastIndex(d.Field, ".")+1:]
	switch {
	case d.Field == "requestId":
		msg = "the requestId was already used for a different write of this key"
	case d.Code == contract.EOutOfRange && (bound == "min" || bound == "max"): // a bound, also a transaction's ops[i].min
		msg = "the result would leave the increment's " + bound
	case !ok:
		msg = "the operation does not fit the key's current entry"
	}
	var v int64
	if d.CurrentVersion != nil {
		v = *d.CurrentVersion
	}
	d.Message = fmt.Sprintf("%s (current version %d; the value is shown only to principals that may read the key)", msg, v)
	d.CurrentValue = nil
	return d
}

// errorHandler answers every error as contract.ErrorBody. Only internal errors are
// logged with their detail; callers see a stable code and message.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		d := contract.ErrorDetail{Code: contract.EInternal, Message: "internal error"}
		var e *contract.Error
		var he *echo.HTTPError
		switch {
		case errors.As(err, &e):
			d = e.Detail()
			if e.Current != nil && !mayRead(c, e.Current.Key) {
				d = withoutValue(d)
			}
			if e.RetryAfterSeconds > 0 {
				c.Response().Header().Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds))
			}
		case errors.As(err, &he):
			switch he.Code {
			case http.StatusNotFound:
				d.Code, d.Message = contract.ENotFound, "no such route"
			case http.StatusMethodNotAllowed:
				d.Code, d.Message = contract.EMethodNotAllowed, "method not allowed on this route"
			case http.StatusRequestEntityTooLarge:
				d.Code, d.Message, d.Field = contract.ETooLarge, "request body too large", "value"
			case http.StatusUnsupportedMediaType:
				d.Code, d.Message = contract.EUnsupportedMediaType, "send Content-Type: application/json"
			default:
				if he.Code < 500 {
					d.Code, d.Message = contract.EInvalid, http.StatusText(he.Code)
				}
			}
		}
		status, ok := statusOf[d.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		if status >= 500 && d.Code == contract.EInternal {
			log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
			d = contract.ErrorDetail{Code: contract.EInternal, Message: "internal error"} // the detail is the log's only
		}
		var werr error
		if c.Request().Method == http.MethodHead {
			werr = c.NoContent(status)
		} else {
			werr = c.JSON(status, contract.ErrorBody{Error: d})
		}
		if werr != nil {
			log.Warn("write error answer", "err", werr)
		}
	}
}
