package api

import (
	"bufio"
	"bytes"
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
	"github.com/eskv/eskv/writer"
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
	lq, err := readListQuery(c)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, scopeKey(lq.prefix)); done {
		return err
	}
	if lq.at != nil {
		return s.listAt(c, lq)
	}
	// Waiting holds no page in memory, so it comes before the slot; the
	// waits of concurrent listings share their polls of the projector.
	where, err := s.w.AwaitProjected(c.Request().Context(), lq.prefix)
	if err != nil {
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
	pg := projection.Page{After: lq.cur.after, Limit: lq.limit, MaxBytes: s.cfg.MaxListBytes, Now: s.now()}
	r := listRead{prefix: lq.prefix, filter: lq.filter, page: pg, at: lq.cur.at}
	if lq.keysOnly {
		return s.listKeysOnly(c, where, r)
	}
	a, err := s.listPage(c.Request().Context(), where, r)
	if err != nil {
		return err
	}
	if a.Position != "" {
		c.Response().Header().Set(PositionHeader, a.Position)
	}
	return writeList(c.Response(), a)
}

// listKeysOnly answers a page of a keys-only listing: Lister.Keys, whose
// query reads no value, paged as a listing (the same cursor, byte budget
// and truncated) and, like it, one snapshot: a later page answers as of
// its first page's position (readKeysPage).
func (s *Server) listKeysOnly(c echo.Context, where writer.Projected, r listRead) error {
	ctx := c.Request().Context()
	var items []contract.KeyInfo
	var truncated bool
	now, err := s.readProjected(ctx, where, func(l Lister) (err error) {
		items, truncated, err = readKeysPage(ctx, l, r, where)
		return err
	})
	if err != nil {
		return err
	}
	at := now
	if r.at != nil && now != nil {
		at = r.at
	}
	a := contract.KeysAnswer{Items: items, Count: len(items), Truncated: truncated, Position: positionText(at)}
	if a.Items == nil {
		a.Items = []contract.KeyInfo{}
	}
	if truncated && len(items) > 0 {
		a.NextCursor = nextListCursor(items[len(items)-1].Key, at)
	}
	setPosition(c, at)
	return c.JSON(http.StatusOK, a)
}

// listQuery is what the query of GET /v1/kv asks for.
type listQuery struct {
	prefix   string
	cur      listCursor
	limit    int
	filter   *projection.Filter
	keysOnly bool
	at       *atParam // a read of the past (at=), nil for one of now
}

// listParams names the query parameters of GET /v1/kv, for the error
// about any other.
const listParams = "prefix, limit, cursor, keysOnly, at, field, op, value"

// readListQuery reads and checks the query of GET /v1/kv, and the
// caller's right to read every key under its prefix. keysOnly=true pages
// by DefaultKeysLimit and MaxKeysLimit and takes no filter.
func readListQuery(c echo.Context) (listQuery, error) {
	p := principalOf(c)
	q := c.QueryParams()
	for name := range q {
		if name != "prefix" && name != "limit" && name != "cursor" && name != "keysOnly" && name != "at" && !isFilterParam(name) {
			return listQuery{}, contract.FieldErrorf(contract.EInvalid, name, "unknown query parameter %q (%s)", name, listParams)
		}
	}
	if err := givenOnce(q); err != nil {
		return listQuery{}, err
	}
	lq := listQuery{prefix: q.Get("prefix")}
	if err := contract.ValidatePrefix(lq.prefix); err != nil {
		return listQuery{}, err
	}
	if !p.AllowsPrefix(Read, lq.prefix) {
		return listQuery{}, contract.FieldErrorf(contract.EForbidden, "prefix", "principal %s may not read every key under %s", p.Name, lq.prefix)
	}
	var err error
	if lq.keysOnly, err = boolParam(q, "keysOnly"); err != nil {
		return listQuery{}, err
	}
	def, most := contract.DefaultListLimit, contract.MaxListLimit
	if lq.keysOnly {
		def, most = contract.DefaultKeysLimit, contract.MaxKeysLimit
	}
	if lq.limit, err = pageLimitOf(q, def, most); err != nil {
		return listQuery{}, err
	}
	if lq.cur, err = parseListCursor(q.Get("cursor"), lq.prefix); err != nil {
		return listQuery{}, err
	}
	if lq.filter, err = listFilter(q); err != nil {
		return listQuery{}, err
	}
	if lq.filter != nil && lq.keysOnly {
		return listQuery{}, contract.FieldErrorf(contract.EInvalid, "keysOnly", "keysOnly lists every key under the prefix: it takes no filter (field, op, value)")
	}
	if lq.at, err = parseAt(q); err != nil {
		return listQuery{}, err
	}
	if err := checkAtQuery(lq); err != nil {
		return listQuery{}, err
	}
	return lq, nil
}

// boolParam reads a query parameter that is true or false (false when
// absent).
func boolParam(q url.Values, name string) (bool, error) {
	switch q.Get(name) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, contract.FieldErrorf(contract.EInvalid, name, "%s must be true or false", name)
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
	if a.Position != "" {
		position, _ := json.Marshal(a.Position)
		fmt.Fprintf(bw, `,"position":%s`, position)
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
func listFilter(q url.Values) (*projection.Filter, error) {
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
	f := &projection.Filter{Field: q.Get("field"), Op: contract.FilterOp(q.Get("op")), Value: json.RawMessage(v)}
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
	return pageLimitOf(q, contract.DefaultListLimit, contract.MaxListLimit)
}

// pageLimitOf is the limit query parameter of a page: def when absent,
// else 1 to most.
func pageLimitOf(q url.Values, def, most int) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, contract.FieldErrorf(contract.EInvalid, "limit", "limit must be an integer between 1 and %d", most)
	}
	return n, nil
}
