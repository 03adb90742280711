package api

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/events"
)

// statusOf maps error codes to HTTP statuses.
var statusOf = map[string]int{
	events.EInvalid:              http.StatusBadRequest,
	events.ETooLarge:             http.StatusRequestEntityTooLarge,
	events.EUnauthenticated:      http.StatusUnauthorized,
	events.EForbidden:            http.StatusForbidden,
	events.ENotFound:             http.StatusNotFound,
	events.EConflict:             http.StatusConflict,
	events.ELockHeld:             http.StatusConflict,
	events.ENotLockHolder:        http.StatusConflict,
	events.ENotLeader:            http.StatusConflict,
	events.EWrongType:            http.StatusConflict,
	events.EFieldMismatch:        http.StatusConflict,
	events.EOutOfRange:           http.StatusConflict,
	events.EQueueEmpty:           http.StatusNotFound,
	events.EStaleReceipt:         http.StatusConflict,
	events.EUnavailable:          http.StatusServiceUnavailable,
	events.EOutcomeUnknown:       http.StatusServiceUnavailable,
	events.ECursorExpired:        http.StatusGone,
	events.ETooManyWatches:       http.StatusServiceUnavailable,
	events.ETooManyRequests:      http.StatusTooManyRequests,
	events.EForwardLoop:          http.StatusServiceUnavailable,
	events.EInternal:             http.StatusInternalServerError,
	events.EMethodNotAllowed:     http.StatusMethodNotAllowed,
	events.EUnsupportedMediaType: http.StatusUnsupportedMediaType,
}

// mayRead reports whether the request's principal may read key.
func mayRead(c echo.Context, key string) bool {
	p := principalOf(c)
	return p != nil && p.Allows(Read, key)
}

// redactedMessages are the messages of answers whose current value (and
// the message naming it or a lock's holder) the caller may not read.
var redactedMessages = map[string]string{
	events.EConflict:      "the key is not at the expected version",
	events.EFieldMismatch: "the field does not equal if.equals",
	events.ELockHeld:      "the lock is held by another holder",
	events.ENotLockHolder: "the lock is held by another holder",
	events.ENotLeader:     "another holder leads the pool",
	events.EWrongType:     "the key's entry does not fit this operation",
	events.EOutOfRange:    "the result would leave the 64-bit integer range",
}

// withoutValue is an answer about a key's current entry for a principal
// that may not read the key: code, field, version, expiry and
// correlation id, but neither the value nor a message that could name it
// (or a lock's holder).
func withoutValue(d events.ErrorDetail) events.ErrorDetail {
	msg, ok := redactedMessages[d.Code]
	bound := d.Field[strings.LastIndex(d.Field, ".")+1:]
	switch {
	case d.Field == "requestId":
		msg = "the requestId was already used for a different write of this key"
	case d.Code == events.EOutOfRange && (bound == "min" || bound == "max"): // a bound, also a transaction's ops[i].min
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

// errorHandler answers every error as events.ErrorBody. Only internal errors are
// logged with their detail; callers see a stable code and message.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		d := events.ErrorDetail{Code: events.EInternal, Message: "internal error"}
		var e *events.Error
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
				d.Code, d.Message = events.ENotFound, "no such route"
			case http.StatusMethodNotAllowed:
				d.Code, d.Message = events.EMethodNotAllowed, "method not allowed on this route"
			case http.StatusRequestEntityTooLarge:
				d.Code, d.Message, d.Field = events.ETooLarge, "request body too large", "value"
			case http.StatusUnsupportedMediaType:
				d.Code, d.Message = events.EUnsupportedMediaType, "send Content-Type: application/json"
			default:
				if he.Code < 500 {
					d.Code, d.Message = events.EInvalid, http.StatusText(he.Code)
				}
			}
		}
		status, ok := statusOf[d.Code]
		if !ok {
			status = http.StatusInternalServerError
		}
		if status >= 500 && d.Code == events.EInternal {
			log.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
			d = events.ErrorDetail{Code: events.EInternal, Message: "internal error"} // the detail is the log's only
		}
		var werr error
		if c.Request().Method == http.MethodHead {
			werr = c.NoContent(status)
		} else {
			werr = c.JSON(status, events.ErrorBody{Error: d})
		}
		if werr != nil {
			log.Warn("write error answer", "err", werr)
		}
	}
}
