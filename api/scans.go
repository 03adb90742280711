package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/events"
)

// listKeys serves GET /v1/kv: a page of the live entries under a prefix,
// optionally filtered.
func (s *Server) listKeys(c echo.Context) error {
	p := c.Get(principalKey).(*Principal)
	q := c.QueryParams()
	for name := range q {
		if name != "prefix" && name != "limit" && name != "cursor" && !isFilterParam(name) {
			return events.FieldErrorf(events.EInvalid, name, "unknown query parameter %q (prefix, limit, cursor, field, op, value)", name)
		}
	}
	prefix := q.Get("prefix")
	if err := events.ValidatePrefix(prefix); err != nil {
		return err
	}
	if !p.AllowsPrefix(Read, prefix) {
		return events.FieldErrorf(events.EForbidden, "prefix", "principal %s may not read every key under %s", p.Name, prefix)
	}
	limit := events.DefaultListLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > events.MaxListLimit {
			return events.FieldErrorf(events.EInvalid, "limit", "limit must be an integer between 1 and %d", events.MaxListLimit)
		}
		limit = n
	}
	var after string
	if v := q.Get("cursor"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || !bytes.HasPrefix(b, []byte(prefix)) {
			return events.FieldErrorf(events.EInvalid, "cursor", "cursor is not one this listing returned")
		}
		after = string(b)
	}
	filter, err := listFilter(q)
	if err != nil {
		return err
	}
	var items []events.Entry
	var truncated bool
	if filter != nil {
		items, truncated, err = s.list.Scan(c.Request().Context(), prefix, *filter, after, limit, s.now())
	} else {
		items, truncated, err = s.list.List(c.Request().Context(), prefix, after, limit, s.now())
	}
	if err != nil {
		return err
	}
	a := events.ListAnswer{Items: items, Count: len(items), Truncated: truncated}
	if a.Items == nil {
		a.Items = []events.Entry{}
	}
	if truncated && len(items) > 0 {
		a.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1].Key))
	}
	return c.JSON(http.StatusOK, a)
}

// filterParams are the query parameters of a filtered listing: all three
// or none.
var filterParams = []string{"field", "op", "value"}

func isFilterParam(name string) bool {
	return name == "field" || name == "op" || name == "value"
}

// listFilter reads the filter of GET /v1/kv from its query: nil when none
// of field, op and value is given; an invalid error naming the parameter
// at fault when one is missing, repeated or wrong.
//
// value is a JSON literal when it parses as one (5 is a number,
// %225%22 the string "5", true, false, null), and otherwise the plain
// string as written (value=done is the string "done").
func listFilter(q url.Values) (*events.Filter, error) {
	given := 0
	for _, p := range filterParams {
		switch len(q[p]) {
		case 0:
		case 1:
			given++
		default:
			return nil, events.FieldErrorf(events.EInvalid, p, "%s is given %d times", p, len(q[p]))
		}
	}
	if given == 0 {
		return nil, nil
	}
	for _, p := range filterParams {
		if !q.Has(p) {
			return nil, events.FieldErrorf(events.EInvalid, p, "%s is missing: a filter needs field, op and value", p)
		}
	}
	v := q.Get("value")
	if !utf8.ValidString(v) {
		return nil, events.FieldErrorf(events.EInvalid, "value", "value must be valid UTF-8")
	}
	f := &events.Filter{Field: q.Get("field"), Op: events.FilterOp(q.Get("op")), Value: json.RawMessage(v)}
	if v == "" || v != strings.TrimSpace(v) || !json.Valid(f.Value) {
		f.Value, _ = json.Marshal(v) // a plain string; valid UTF-8 encodes as it is
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}
