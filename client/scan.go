package client

import (
	"bytes"
	"context"
	"iter"
	"net/url"
	"strconv"

	"github.com/eskv/eskv/contract"
)

// Filter keeps the entries whose value is a JSON object with a top-level
// field Field that holds a value of Value's JSON type comparing to Value
// as Op says. An entry without the field, or with a value of another
// type there, does not match: Filter{Field: "state", Op: contract.FilterNe, Value: "done"} skips entries
// that have no state. Only scalar fields compare, within the caps of the
// server (field names and strings up to 256 bytes, numbers up to 256
// characters written out, the first 64 fields of a value by name).
// A field the project declares (AddFieldIndexes) is answered from an
// index; any other is scanned from the values, a bounded number per page.
//
// Timestamps compare as instants when they are strings in one fixed form:
// RFC 3339 in UTC with always the same number of fractional digits, such
// as t.UTC().Format(time.RFC3339) ("2026-03-04T05:06:07Z").
type Filter struct {
	// Field is the top-level field of the values compared (declared
	// by the project for an indexed scan: AddFieldIndexes).
	Field string
	// Op is one of contract.FilterOps; booleans and null only take
	// contract.FilterEq.
	Op contract.FilterOp
	// Value is sent as JSON: a string, a number (any Go integer or float
	// type, or json.Number), a bool, nil for null, or a json.RawMessage
	// holding one such literal.
	Value any
}

// ScanOptions select one page of a filtered listing.
type ScanOptions struct {
	// Prefix must start with tenant/<t>/project/<p>/.
	Prefix string
	// Filter keeps the entries whose value's field compares as asked.
	Filter Filter
	// Limit is the page size, 1..1000; 0 means the server's default (100).
	Limit int
	// Cursor is the NextCursor of the previous page of the same prefix and
	// filter.
	Cursor string
}

// Scan returns one page of the live entries under o.Prefix that match
// o.Filter, in bytewise key order. Postgres answers it from the index of
// a field the project declares (AddFieldIndexes), else by reading the
// values under the prefix, at most about ten per item asked (1,000 to
// 10,000) per page: such a page may hold fewer items than the limit, or
// none, and still have a NextCursor; follow it (ScanAll does) until
// there is none. Like List it sees every write acknowledged before it
// was sent. Scan is retried on 503 and network errors. A filter the server refuses is an *contract.Error with code
// contract.EInvalid naming "field", "op" or "value".
func (c *Client) Scan(ctx context.Context, o ScanOptions) (ListPage, error) {
	value, err := marshal(o.Filter.Value)
	if err != nil {
		return ListPage{}, contract.FieldErrorf(contract.EInvalid, "value", "filter value does not encode as JSON: %v", err)
	}
	if len(value) > 0 && (value[0] == '{' || value[0] == '[') {
		return ListPage{}, contract.FieldErrorf(contract.EInvalid, "value", "filter value %s is not a string, number, bool or nil", value)
	}
	q := url.Values{
		"prefix": {o.Prefix},
		"field":  {o.Filter.Field},
		"op":     {string(o.Filter.Op)},
		// Always a JSON literal, so "5" stays a string.
		"value": {string(bytes.TrimSpace(value))},
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return c.listPage(ctx, q)
}

// ScanAll yields every live entry under o.Prefix that matches o.Filter,
// from o.Cursor on, fetching pages of o.Limit as it goes. On an error it
// yields the error once and stops.
func (c *Client) ScanAll(ctx context.Context, o ScanOptions) iter.Seq2[contract.Entry, error] {
	return allPages(o.Cursor, func(cursor string) (ListPage, error) {
		o.Cursor = cursor
		return c.Scan(ctx, o)
	})
}
