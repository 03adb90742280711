package api

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// listKeys serves GET /v1/kv: a page of the live entries under a prefix,
// optionally filtered, that holds every write acknowledged before the
// request arrived (linearizable, like GET of one key).
//
// A prefix lies in one scope, so one partition: its owner answers (other
// writers forward to it, as for GET), first waiting until the projection
// holds every write under the prefix it acknowledged (Writer.AwaitProjected),
// then running one query of the projection. One SQL snapshot keeps
// filters, pages, cursors, truncated, count, the byte budget and expiry
// hiding exact, and shows a transaction's events all or none once the
// projector applies each in one Postgres transaction (issue P3 section 2). Merging the overlay into the
// page instead would answer without the projector's lag but needs a second
// implementation of all of that in Go (docs/guarantees.md).
func (s *Server) listKeys(c echo.Context) error {
	p := principalOf(c)
	q := c.QueryParams()
	for name := range q {
		if name != "prefix" && name != "limit" && name != "cursor" && name != "at" && !isFilterParam(name) {
			return contract.FieldErrorf(contract.EInvalid, name, "unknown query parameter %q (prefix, limit, cursor, at, field, op, value)", name)
		}
	}
	if err := givenOnce(q); err != nil {
		return err
	}
	prefix := q.Get("prefix")
	if err := contract.ValidatePrefix(prefix); err != nil {
		return err
	}
	if !p.AllowsPrefix(Read, prefix) {
		return contract.FieldErrorf(contract.EForbidden, "prefix", "principal %s may not read every key under %s", p.Name, prefix)
	}
	limit, err := pageLimit(q)
	if err != nil {
		return err
	}
	at, err := parseAt(q)
	if err != nil {
		return err
	}
	after, from, err := pastCursor(q.Get("cursor"), prefix, at != nil)
	if err != nil {
		return err
	}
	filter, err := listFilter(q)
	if err != nil {
		return err
	}
	if err := checkAtFilter(filter, at); err != nil {
		return err
	}
	if done, err := s.forward(c, scopeKey(prefix)); done {
		return err
	}
	if at != nil {
		return s.listAt(c, prefix, at, from, projection.Page{After: after, Limit: limit, MaxBytes: s.cfg.MaxListBytes})
	}
	// Waiting holds no page in memory, so it comes before the slot; the
	// waits of concurrent listings share their polls of the projector.
	if err := s.w.AwaitProjected(c.Request().Context(), prefix); err != nil {
		return err
	}
	// The slot is held until the answer is written (or the write
	// timeout ends a client that does not read it): the page stays in
	// memory that long.
	release, err := s.takeList(c)
	if err != nil {
		return err
	}
	defer release()
	var items []contract.Entry
	var truncated bool
	if filter != nil {
		items, truncated, err = s.list.Scan(c.Request().Context(), prefix, *filter, projection.Page{After: after, Limit: limit, MaxBytes: s.cfg.MaxListBytes, Now: s.now()})
	} else {
		items, truncated, err = s.list.List(c.Request().Context(), prefix, projection.Page{After: after, Limit: limit, MaxBytes: s.cfg.MaxListBytes, Now: s.now()})
	}
	if err != nil {
		return err
	}
	a := contract.ListAnswer{Items: items, Count: len(items), Truncated: truncated}
	if truncated && len(items) > 0 {
		a.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1].Key))
	}
	return writeList(c.Response(), a)
}

// scopeKey is a key of prefix's scope (tenant/<t>/project/<p>, the unit
// of partitioning), for Route and forward, which look at nothing else. The
// prefix is valid (contract.ValidatePrefix): it has the four components.
func scopeKey(prefix string) contract.Key {
	parts := strings.SplitN(prefix, "/", 5)
	return contract.Key{Tenant: parts[1], Project: parts[3]}
}

// writeList answers a as JSON (contract.ListAnswer's encoding), one entry
// at a time through a small buffer rather than the whole page encoded in
// memory at once.
func writeList(w *echo.Response, a contract.ListAnswer) error {
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	var one bytes.Buffer
	enc := json.NewEncoder(&one)
	enc.SetEscapeHTML(false) // values are answered as stored (jsonSerializer)
	bw.WriteString(`{"items":[`)
	for i := range a.Items {
		one.Reset()
		if err := enc.Encode(&a.Items[i]); err != nil {
			return err
		}
		if i > 0 {
			bw.WriteByte(',')
		}
		if _, err := bw.Write(bytes.TrimSuffix(one.Bytes(), []byte("\n"))); err != nil {
			return err
		}
	}
	// The fields after items, as contract.ListAnswer encodes them
	// (TestListAnswerEncoding keeps the two equal).
	fmt.Fprintf(bw, `],"count":%d,"truncated":%t`, a.Count, a.Truncated)
	if a.NextCursor != "" {
		cursor, _ := json.Marshal(a.NextCursor)
		fmt.Fprintf(bw, `,"nextCursor":%s`, cursor)
	}
	bw.WriteByte('}')
	return bw.Flush()
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
func listFilter(q url.Values) (*contract.Filter, error) {
	given := 0
	for _, p := range filterParams {
		switch len(q[p]) {
		case 0:
		case 1:
			given++
		default:
			return nil, contract.FieldErrorf(contract.EInvalid, p, "%s is given %d times", p, len(q[p]))
		}
	}
	if given == 0 {
		return nil, nil
	}
	for _, p := range filterParams {
		if !q.Has(p) {
			return nil, contract.FieldErrorf(contract.EInvalid, p, "%s is missing: a filter needs field, op and value", p)
		}
	}
	v := q.Get("value")
	if !utf8.ValidString(v) {
		return nil, contract.FieldErrorf(contract.EInvalid, "value", "value must be valid UTF-8")
	}
	f := &contract.Filter{Field: q.Get("field"), Op: contract.FilterOp(q.Get("op")), Value: json.RawMessage(v)}
	if v == "" || v != strings.TrimSpace(v) || !json.Valid(f.Value) {
		f.Value, _ = json.Marshal(v) // a plain string; valid UTF-8 encodes as it is
	}
	if err := f.Validate(); err != nil {
		return nil, err
	}
	return f, nil
}

// pageLimit is the limit query parameter of a page (a listing, a set's
// members): DefaultListLimit when absent.
func pageLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return contract.DefaultListLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > contract.MaxListLimit {
		return 0, contract.FieldErrorf(contract.EInvalid, "limit", "limit must be an integer between 1 and %d", contract.MaxListLimit)
	}
	return n, nil
}
