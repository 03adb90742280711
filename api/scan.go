package api

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
)

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
func listFilter(q url.Values) (*projection.Filter, error) {
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
	f := &projection.Filter{Field: q.Get("field"), Op: projection.Op(q.Get("op")), Value: json.RawMessage(v)}
	if v == "" || v != strings.TrimSpace(v) || !json.Valid(f.Value) {
		f.Value, _ = json.Marshal(v) // a plain string; valid UTF-8 encodes as it is
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// scan answers a filtered listing.
func (s *Server) scan(ctx context.Context, prefix string, f projection.Filter, after string, limit int) ([]events.Entry, bool, error) {
	return s.list.Scan(ctx, prefix, f, after, limit, s.now())
}
