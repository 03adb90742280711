package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/writer"
)

// bodyOverheadMax is what a body may hold besides its values.
const bodyOverheadMax = 16 << 10

// decode reads the request body, within the size limit, into v strictly:
// one JSON object, no unknown fields. Errors inside semantics name their
// full path (semantics.owner).
func (s *Server) decode(c echo.Context, v any) error {
	limit := int64(2*s.cfg.MaxValueBytes + bodyOverheadMax)
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, limit+1))
	if err != nil {
		return events.Errorf(events.EInvalid, "read body: %v", err)
	}
	if int64(len(body)) > limit {
		return events.FieldErrorf(events.ETooLarge, "value", "request body is over %d bytes", limit)
	}
	var probe struct {
		Semantics json.RawMessage `json:"semantics"`
	}
	if json.Unmarshal(body, &probe) == nil && len(probe.Semantics) > 0 && string(probe.Semantics) != "null" {
		if err := strict(probe.Semantics, new(events.Semantics), "semantics."); err != nil {
			return err
		}
	}
	return strict(body, v, "")
}

// strict decodes one JSON value with no unknown fields; path prefixes the
// field names in errors.
func strict(b []byte, v any, path string) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return jsonError(err, path)
	}
	if d.More() {
		return events.Errorf(events.EInvalid, "body has data after the JSON object")
	}
	return nil
}

func jsonError(err error, path string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return events.FieldErrorf(events.EInvalid, path+te.Field, "field %s must be %s", path+te.Field, te.Type.String())
	}
	msg := err.Error()
	if f, ok := cutUnknownField(msg); ok {
		return events.FieldErrorf(events.EInvalid, path+f, "unknown field %q", path+f)
	}
	if errors.Is(err, io.EOF) {
		return events.Errorf(events.EInvalid, "body is empty: send a JSON object")
	}
	return events.Errorf(events.EInvalid, "body is not valid JSON: %s", msg)
}

// cutUnknownField extracts the field name of encoding/json's unknown-field
// error, which has no typed form.
func cutUnknownField(msg string) (string, bool) {
	const p = `json: unknown field "`
	if len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p) : len(msg)-1], true
	}
	return "", false
}

// write asks the writer to decide req; a replayed answer says so in the
// Eskv-Replayed header.
func (s *Server) write(c echo.Context, req *writer.Request) (writer.Result, error) {
	res, err := s.w.Do(c.Request().Context(), req)
	if err == nil && res.Replayed {
		c.Response().Header().Set("Eskv-Replayed", "true")
	}
	return res, err
}

// writeEntry runs a request whose answer is the entry after it; its
// value only for a caller who may read the key (a patch or an increment
// answer would show what a write-only token did not send).
func (s *Server) writeEntry(c echo.Context, req *writer.Request) error {
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	if p, ok := c.Get(principalKey).(*Principal); !ok || !p.Allows(Read, req.Key.String()) {
		res.Entry.Value = nil
	}
	return c.JSON(http.StatusOK, res.Entry)
}
