package client

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/eskv/eskv/contract"
)

// keyPath is the escaped path of a key's route. Each component is escaped
// on its own so the slashes stay separators and anything else reaches the
// server's key rules as written.
func keyPath(key string) (string, error) {
	if key == "" {
		return "", contract.FieldErrorf(contract.EInvalid, "key", "key is empty")
	}
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/v1/kv/" + strings.Join(parts, "/"), nil
}

// Get returns the key's current entry, or with At or AtTime its entry at
// that point of the past. An absent key (never written, deleted or
// expired) is an *contract.Error with code contract.ENotFound. Get is
// retried on 503 and network errors.
func (c *Client) Get(ctx context.Context, key string, opts ...ReadOption) (contract.Entry, error) {
	p, err := keyPath(key)
	if err != nil {
		return contract.Entry{}, err
	}
	var e contract.Entry
	_, err = c.do(ctx, call{method: http.MethodGet, path: p, query: readQuery(url.Values{}, opts), key: key, retry: true}, &e)
	return e, err
}

// PositionHeader is the response header in which every read of a key or
// of a listing tells the log position its answer reflects (a watch
// cursor, p<partition>.o<offset>): watching after it delivers exactly the
// changes after the read.
const PositionHeader = "ESKV-Position"

// GetWithPosition is Get, also returning the position the entry reflects
// (PositionHeader): the entry holds every event of its key up to that
// position and none after, so Watch with After set to it follows the key
// from exactly there. On an error the position is "".
func (c *Client) GetWithPosition(ctx context.Context, key string) (contract.Entry, string, error) {
	p, err := keyPath(key)
	if err != nil {
		return contract.Entry{}, "", err
	}
	var e contract.Entry
	h, err := c.do(ctx, call{method: http.MethodGet, path: p, key: key, retry: true}, &e)
	if err != nil {
		return contract.Entry{}, "", err
	}
	return e, h.Get(PositionHeader), nil
}

// ReadOption changes what Get, List and ListAll read: At and AtTime read
// the past.
type ReadOption func(q url.Values)

// At reads the state as of a position of the key's (or the prefix's)
// partition: every event of the partition up to that offset, as a
// watch's cursor names it (contract.ParseCursor reads one). A position of
// another partition, or past the end of the log, is an *contract.Error
// with code contract.EInvalid naming "at"; one older than the history
// the server keeps is contract.ECursorExpired (HTTP 410). An entry past
// its expiry is there until its expire event (docs/api.md, "Reads of the
// past").
func At(position contract.Cursor) ReadOption {
	return func(q url.Values) { q.Set("at", position.String()) }
}

// AtTime reads the state as of time t: the position of the latest event
// (by event time) at or before t, and without the entries whose expiry
// is at or before t. A time in the future is contract.EInvalid naming
// "at".
func AtTime(t time.Time) ReadOption {
	return func(q url.Values) { q.Set("at", t.UTC().Format(time.RFC3339Nano)) }
}

// readQuery is q with opts applied; nil when it stays empty.
func readQuery(q url.Values, opts []ReadOption) url.Values {
	for _, o := range opts {
		o(q)
	}
	if len(q) == 0 {
		return nil
	}
	return q
}

// PutRequest is one write of a key.
type PutRequest struct {
	// Key is the entry's key: tenant/<t>/project/<p>/...
	Key string
	// Value is the JSON value to store; nil stores JSON null.
	Value json.RawMessage
	// ExpectedVersion makes the write a compare-and-swap: nil writes
	// unconditionally, 0 requires the key to be absent, N requires its
	// current version to be N (&n, or new(int64(N)) from Go 1.26 on).
	ExpectedVersion *int64
	// TTL expires the entry this long after the write, in whole seconds;
	// 0 means no expiry (and clears an earlier one).
	TTL time.Duration
	// Semantics says what the entry is for; the zero value is purpose
	// "other".
	Semantics contract.Semantics
	// RequestID makes the write idempotent: repeating the key's last write
	// with the same RequestID and body is answered as a replay. Writes
	// with a RequestID are retried on 503 and network errors.
	RequestID string
	// SpecRef references the spec or decision record the write follows.
	SpecRef string
	// Session attaches the key to the session at that key (Session.Key,
	// in the same project): the entry has no TTL of its own and is
	// deleted when the session ends. TTL must then be 0.
	Session string
}

// PutResult is the answer of a write.
type PutResult struct {
	// Entry is the key's entry after the write.
	Entry contract.Entry
	// Replayed is true when the request repeated the key's last write
	// (same RequestID and body): nothing new was written.
	Replayed bool
}

// Put writes a new version of r.Key. A compare-and-swap that does not
// match is an *contract.Error with code contract.EConflict whose Current holds
// the key's current version and value (nil when the key is absent).
func (c *Client) Put(ctx context.Context, r PutRequest) (PutResult, error) {
	b := contract.PutBody{Value: r.Value, ExpectedVersion: r.ExpectedVersion, RequestID: r.RequestID, SpecRef: r.SpecRef,
		Semantics: semantics(r.Semantics), Session: r.Session}
	if b.Value == nil {
		b.Value = json.RawMessage("null")
	}
	if !json.Valid(b.Value) {
		return PutResult{}, contract.FieldErrorf(contract.EInvalid, "value", "value is not valid JSON")
	}
	var err error
	if b.TTLSeconds, err = ttlSeconds(r.TTL); err != nil {
		return PutResult{}, err
	}
	return c.writeEntry(ctx, http.MethodPut, r.Key, &b, b.Idempotent())
}

// writeEntry sends a write of key whose answer is the entry after it;
// retry says it is safe to repeat.
func (c *Client) writeEntry(ctx context.Context, method, key string, body any, retry bool) (PutResult, error) {
	p, err := keyPath(key)
	if err != nil {
		return PutResult{}, err
	}
	b, err := marshal(body)
	if err != nil {
		return PutResult{}, err
	}
	var res PutResult
	h, err := c.do(ctx, call{method: method, path: p, body: b, key: key, retry: retry}, &res.Entry)
	if err != nil {
		return PutResult{}, err
	}
	res.Replayed = h.Get("Eskv-Replayed") == "true"
	return res, nil
}

func isZero(s contract.Semantics) bool {
	return s.Purpose == "" && s.Producer == "" && len(s.ConsumerHints) == 0 && s.TTLSeconds == 0
}

// marshal encodes v without rewriting <, > and & in values.
func marshal(v any) ([]byte, error) { return contract.EncodeJSON(v) }

// DeleteOptions qualify a delete: ExpectedVersion, when set, is the
// version the key must have now; RequestID makes the delete idempotent
// (and retried), see PutRequest.
type DeleteOptions = contract.DeleteParams

// DeleteResult is the answer of a delete.
type DeleteResult = contract.DeleteAnswer

// Delete deletes key. An absent key is contract.ENotFound; a version
// mismatch is contract.EConflict (checked first).
func (c *Client) Delete(ctx context.Context, key string, o DeleteOptions) (DeleteResult, error) {
	p, err := keyPath(key)
	if err != nil {
		return DeleteResult{}, err
	}
	q := url.Values{}
	if o.ExpectedVersion != nil {
		q.Set("expectedVersion", strconv.FormatInt(*o.ExpectedVersion, 10))
	}
	if o.RequestID != "" {
		q.Set("requestId", o.RequestID)
	}
	var res DeleteResult
	h, err := c.do(ctx, call{method: http.MethodDelete, path: p, query: q, key: key, retry: o.RequestID != ""}, &res)
	if err != nil {
		return DeleteResult{}, err
	}
	res.Replayed = h.Get("Eskv-Replayed") == "true"
	return res, nil
}

// ListOptions select one page of a listing.
type ListOptions struct {
	// Prefix must start with tenant/<t>/project/<p>/.
	Prefix string
	// Limit is the page size, 1..1000; 0 means the server's default (100).
	Limit int
	// Cursor is the NextCursor of the previous page of the same prefix.
	Cursor string
}

// ListPage is one page of a listing: live entries in bytewise key order;
// Truncated says more follow (ask again with Cursor set to NextCursor).
// Position is the log position the listing reflects; every page of one
// listing answers as of its first page's (NextCursor carries it), so the
// pages together are one snapshot, and Watch with After set to Position
// delivers exactly the changes after it: list, then watch from the
// listing's position (docs/watch.md).
type ListPage = contract.ListAnswer

// List returns one page of the live entries under o.Prefix. A listing
// holds every write acknowledged before it was sent (the server answers it
// once its projection holds them); with At or AtTime, the entries at that
// point of the past (ask for the next page with the same option: the
// cursor carries the page's position). List is retried on 503 and
// network errors.
func (c *Client) List(ctx context.Context, o ListOptions, opts ...ReadOption) (ListPage, error) {
	q := readQuery(url.Values{"prefix": {o.Prefix}}, opts)
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return c.listPage(ctx, q)
}

// listPage fetches one page of GET /v1/kv.
func (c *Client) listPage(ctx context.Context, q url.Values) (ListPage, error) {
	var page ListPage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/kv", query: q, retry: true}, &page); err != nil {
		return ListPage{}, err
	}
	if page.Items == nil {
		page.Items = []contract.Entry{}
	}
	return page, nil
}

// ListAll yields every live entry under o.Prefix from o.Cursor on (with
// At or AtTime, as List, at that point of the past), fetching pages of
// o.Limit as it goes. On an error it yields the error once and stops.
func (c *Client) ListAll(ctx context.Context, o ListOptions, opts ...ReadOption) iter.Seq2[contract.Entry, error] {
	return allPages(o.Cursor, func(cursor string) (ListPage, error) {
		o.Cursor = cursor
		return c.List(ctx, o, opts...)
	})
}

// allPages yields the entries of page after page, from cursor on; on an
// error it yields the error once and stops.
func allPages(cursor string, page func(cursor string) (ListPage, error)) iter.Seq2[contract.Entry, error] {
	return func(yield func(contract.Entry, error) bool) {
		for {
			p, err := page(cursor)
			if err != nil {
				yield(contract.Entry{}, err)
				return
			}
			for _, e := range p.Items {
				if !yield(e, nil) {
					return
				}
			}
			if !p.Truncated || p.NextCursor == "" {
				return
			}
			cursor = p.NextCursor
		}
	}
}
