package api

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/events"
)

// statusOf maps error codes to HTTP statuses.
var statusOf = map[string]int{
	events.EInvalid:          http.StatusBadRequest,
	events.ETooLarge:         http.StatusRequestEntityTooLarge,
	events.EUnauthenticated:  http.StatusUnauthorized,
	events.EForbidden:        http.StatusForbidden,
	events.ENotFound:         http.StatusNotFound,
	events.EConflict:         http.StatusConflict,
	events.ELockHeld:         http.StatusConflict,
	events.ENotLockHolder:    http.StatusConflict,
	events.ENotLeader:        http.StatusConflict,
	events.EWrongType:        http.StatusConflict,
	events.EFieldMismatch:    http.StatusConflict,
	events.EOutOfRange:       http.StatusConflict,
	events.EUnavailable:      http.StatusServiceUnavailable,
	events.EInternal:         http.StatusInternalServerError,
	"method_not_allowed":     http.StatusMethodNotAllowed,
	"unsupported_media_type": http.StatusUnsupportedMediaType,
}

// ErrorBody is the JSON of every error answer.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes an error; Code is stable and machine-readable.
type ErrorDetail struct {
	Code              string          `json:"code"`
	Message           string          `json:"message"`
	Field             string          `json:"field,omitempty"`
	CurrentVersion    *int64          `json:"currentVersion,omitempty"`
	CurrentValue      json.RawMessage `json:"currentValue,omitempty"`
	CurrentExpiresAt  *time.Time      `json:"currentExpiresAt,omitempty"`
	CorrelationID     string          `json:"correlationId,omitempty"`
	RetryAfterSeconds int             `json:"retryAfterSeconds,omitempty"`
}

// errorHandler answers every error as ErrorBody. Only internal errors are
// logged with their detail; callers see a stable code and message.
func errorHandler(log *slog.Logger) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		d := ErrorDetail{Code: events.EInternal, Message: "internal error"}
		var e *events.Error
		var he *echo.HTTPError
		switch {
		case errors.As(err, &e):
			d.Code, d.Message, d.Field = e.Code, e.Message, e.Field
			d.CorrelationID = e.CorrelationID
			if e.Current != nil || e.Code == events.EConflict || e.Code == events.EFieldMismatch {
				var v int64
				d.CurrentValue = json.RawMessage("null")
				if e.Current != nil {
					v, d.CurrentValue, d.CurrentExpiresAt = e.Current.Version, e.Current.Value, e.Current.ExpiresAt
				}
				d.CurrentVersion = &v
			}
			if e.RetryAfterSeconds > 0 {
				d.RetryAfterSeconds = e.RetryAfterSeconds
				c.Response().Header().Set("Retry-After", strconv.Itoa(e.RetryAfterSeconds))
			}
		case errors.As(err, &he):
			switch he.Code {
			case http.StatusNotFound:
				d.Code, d.Message = events.ENotFound, "no such route"
			case http.StatusMethodNotAllowed:
				d.Code, d.Message = "method_not_allowed", "method not allowed on this route"
			case http.StatusRequestEntityTooLarge:
				d.Code, d.Message, d.Field = events.ETooLarge, "request body too large", "value"
			case http.StatusUnsupportedMediaType:
				d.Code, d.Message = "unsupported_media_type", "send Content-Type: application/json"
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
		}
		var werr error
		if c.Request().Method == http.MethodHead {
			werr = c.NoContent(status)
		} else {
			werr = c.JSON(status, ErrorBody{Error: d})
		}
		if werr != nil {
			log.Warn("write error answer", "err", werr)
		}
	}
}
