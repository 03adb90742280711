package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/writer"
)

// bodyOverheadMax is what a body may hold besides its values.
const bodyOverheadMax = 16 << 10

// MaxTxnBodyBytes bounds the body of a transaction (as DynamoDB's 4 MB
// per TransactWriteItems); a server whose value limit is larger takes one
// value of that limit (LargestBody).
const MaxTxnBodyBytes = 4 << 20

// LargestBody is the longest request body accepted (a transaction's)
// with values of at most maxValueBytes: a share of body bytes needs one
// more byte than it (Config.MaxBodyBytesPerPrincipal).
func LargestBody(maxValueBytes int) int {
	return max(MaxTxnBodyBytes, 2*maxValueBytes+bodyOverheadMax)
}

// decode reads the request body, within the size limit, into v strictly:
// one JSON object whose members are v's fields, each named exactly (not
// in another case) and at most once, at any depth. Errors name the field
// at fault by its full path (semantics.owner) and in JSON's words.
func (s *Server) decode(c echo.Context, v any) error {
	_, err := decodeBody(c, v, 2*s.cfg.MaxValueBytes+bodyOverheadMax)
	return err
}

// decodeBody decodes like decode a body of at most limit bytes, and
// returns it.
func decodeBody(c echo.Context, v any, limit int) ([]byte, error) {
	body, err := readBody(c, limit)
	if err != nil {
		return nil, err
	}
	if b, ok := v.(*contract.PutBody); ok && codec.DecodePutBody(body, b) {
		return body, nil
	}
	return body, decodeStrict(body, v)
}

// decodeStrict decodes body into v as decode describes.
func decodeStrict(body []byte, v any) error {
	if err := decodeOne(body, v); err != nil {
		return err
	}
	return checkMembers(body, reflect.TypeOf(v), "")
}

// bodyTooLarge is the answer to a body of more than limit bytes.
func bodyTooLarge(limit int) error {
	return contract.FieldErrorf(contract.ETooLarge, "value", "request body is over %d bytes", limit)
}

// readBody reads the request's body, of at most limit bytes: 413 for a
// longer one, at once when it declares its length (nothing of it is
// read), else after limit+1 bytes. The bytes it holds are charged to the
// request's principal (chargeBody) before they are read: all at once
// when the request declares its length, read into one buffer of that
// length, else as the buffer grows.
func readBody(c echo.Context, limit int) ([]byte, error) {
	r := c.Request()
	size := min(512, limit+1)
	if cl := r.ContentLength; cl > int64(limit) {
		skipBody(c)
		return nil, bodyTooLarge(limit)
	} else if cl >= 0 {
		size = int(cl) + 1 // + 1: room to see the end without growing
	}
	if err := chargeBody(c, size); err != nil {
		return nil, err
	}
	b := make([]byte, 0, size)
	for {
		if len(b) > limit {
			skipBody(c)
			return nil, bodyTooLarge(limit)
		}
		if len(b) == cap(b) {
			grown := min(2*cap(b), limit+1)
			if err := chargeBody(c, grown-cap(b)); err != nil {
				return nil, err
			}
			b = append(make([]byte, 0, grown), b...)
		}
		n, err := r.Body.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			if len(b) > limit {
				skipBody(c)
				return nil, bodyTooLarge(limit)
			}
			return b, nil
		}
		if err != nil {
			return nil, contract.Errorf(contract.EInvalid, "read body: %v", err)
		}
	}
}

// skipBody closes the request's connection after its answer when the
// request declared a body that is not read to its end: the server then
// neither reads the rest nor waits for it.
func skipBody(c echo.Context) {
	if c.Request().ContentLength != 0 {
		c.Response().Header().Set("Connection", "close")
		_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now())
	}
}

// decodeBodyOrEmpty is decodeBody that accepts an empty body (v keeps its
// zero value).
func decodeBodyOrEmpty(c echo.Context, v any, limit int) ([]byte, error) {
	body, err := readBody(c, limit)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return body, err
	}
	if err := decodeOne(body, v); err != nil {
		return nil, err
	}
	return body, checkMembers(body, reflect.TypeOf(v), "")
}

// queryOf is c's query parameters, read only: nil (no parameter) without
// parsing when the request has no query, as most have; c.QueryParams()
// makes an empty map for those.
func queryOf(c echo.Context) url.Values {
	if c.QueryString() == "" {
		return nil
	}
	return c.QueryParams()
}

// givenOnce refuses a query parameter given more than once: which of two
// counts would depend on the reader, as with a JSON member given twice.
func givenOnce(q url.Values) error {
	for name, vs := range q {
		if len(vs) > 1 {
			return contract.FieldErrorf(contract.EInvalid, name, "%s is given %d times", name, len(vs))
		}
	}
	return nil
}

// decodeOne decodes b, one JSON value, into v. Unknown fields are
// checkMembers' to report, with their path.
func decodeOne(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return jsonError(err)
	}
	if d.More() {
		return contract.Errorf(contract.EInvalid, "body has data after the JSON object")
	}
	return nil
}

func jsonError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return contract.Errorf(contract.EInvalid, "body must be %s, not %s", jsonKind(te.Type), jsonValueKind(te.Value))
		}
		return contract.FieldErrorf(contract.EInvalid, te.Field, "field %s must be %s, not %s", te.Field, jsonKind(te.Type), jsonValueKind(te.Value))
	}
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return contract.Errorf(contract.EInvalid, "body is not valid JSON: %s (at byte %d)", se.Error(), se.Offset)
	case errors.Is(err, io.EOF):
		return contract.Errorf(contract.EInvalid, "body is empty: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return contract.Errorf(contract.EInvalid, "body is not valid JSON: it ends early")
	}
	return contract.Errorf(contract.EInvalid, "body is not valid JSON")
}

// jsonKind names, in JSON's words, what a Go type decodes from.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a non-negative integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	default:
		return "a JSON object"
	}
}

// jsonValueKind names the JSON value encoding/json found ("number 1.5",
// "string", "array") with its article; a number keeps its text.
func jsonValueKind(v string) string {
	switch {
	case v == "array" || v == "object":
		return "an " + v
	case v == "bool":
		return "true or false"
	case v == "number" || strings.HasPrefix(v, "number "):
		return v
	}
	return "a " + v
}

// write asks the writer to decide req, made for the request's directive
// (setDirective); a replayed answer says so in the
// Eskv-Replayed header. A request (or a transaction's step) on a key the
// caller may not read is marked blind first, and refused what a blind
// request may not ask (decide.CheckBlind: 403 naming the parameter). A
// write under a project's reserved path (.eskv/) is refused unless it is
// a put or a delete of the field-index declaration (decide.CheckReserved).
func (s *Server) write(c echo.Context, req decide.Command) (writer.Result, error) {
	if err := setDirective(c, req); err != nil {
		return writer.Result{}, err
	}
	if err := checkWrite(c, req); err != nil {
		return writer.Result{}, err
	}
	res, err := s.w.Do(c.Request().Context(), req)
	if err == nil && res.Replayed {
		c.Response().Header().Set("Eskv-Replayed", "true")
	}
	return res, err
}

// writeEntry runs a request whose answer is the entry after it; its
// value only for a caller who may read the key (a patch or an increment
// answer would show what a write-only token did not send).
func (s *Server) writeEntry(c echo.Context, req *decide.KV) error {
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	if !mayRead(c, req.Key.String()) {
		res.Entry.Value = nil
	}
	return answerEntry(c, &res.Entry)
}

// checkWrite is what every write is checked for before the writer sees
// it: what a blind request may not ask (blind) and writes under the
// reserved path (decide.CheckReserved).
func checkWrite(c echo.Context, req decide.Command) error {
	if err := blind(c, req); err != nil {
		return err
	}
	return decide.CheckReserved(req)
}

// blind marks req, or each step of a transaction, Blind when the caller
// may not read its key, and checks what it asks (decide.CheckBlind). A
// refused step of a transaction is noted for the denial's log line and
// audit record, as an unauthorized one is (txnDenied).
func blind(c echo.Context, req decide.Command) error {
	txn, ok := req.(*decide.Txn)
	if !ok {
		h := req.Head()
		h.Blind = !mayRead(c, h.Key.String())
		return decide.CheckBlind(req)
	}
	for _, s := range txn.Steps {
		s.Write.Blind = !mayRead(c, s.Write.Key.String())
	}
	err := decide.CheckBlind(req)
	var e *contract.Error
	if errors.As(err, &e) && e.FailedOp != nil {
		s := txn.Steps[*e.FailedOp].Write
		c.Set(txnDeniedKey, txnDenied{op: s.Op, key: s.Key.String(), write: s.Op != contract.OpCheck})
	}
	return err
}
