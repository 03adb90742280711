package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"

	"github.com/eskv/eskv/contract"
)

// KeysPage is one page of a keys-only listing: keys with their version,
// purpose and expiry, no value; Truncated says more follow (ask again
// with Cursor set to NextCursor).
type KeysPage = contract.KeysAnswer

// ListKeys returns one page of the live keys under o.Prefix without their
// values (GET /v1/kv?keysOnly=true): o.Limit is 1..contract.MaxKeysLimit,
// 0 the server's default (contract.DefaultKeysLimit). It holds every
// write acknowledged before it was sent, as List does, and is retried on
// 503 and network errors. With At or AtTime, the keys at that point of
// the past (as List).
func (c *Client) ListKeys(ctx context.Context, o ListOptions, opts ...ReadOption) (KeysPage, error) {
	q := readQuery(url.Values{"prefix": {o.Prefix}, "keysOnly": {"true"}}, opts)
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	var page KeysPage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/kv", query: q, retry: true}, &page); err != nil {
		return KeysPage{}, err
	}
	if page.Items == nil {
		page.Items = []contract.KeyInfo{}
	}
	return page, nil
}

// ListKeysAll yields every live key under o.Prefix from o.Cursor on, a
// keys-only page of o.Limit at a time. On an error it yields the error
// once and stops. With At or AtTime, the keys at that point of the past.
func (c *Client) ListKeysAll(ctx context.Context, o ListOptions, opts ...ReadOption) iter.Seq2[contract.KeyInfo, error] {
	return func(yield func(contract.KeyInfo, error) bool) {
		for {
			p, err := c.ListKeys(ctx, o, opts...)
			if err != nil {
				yield(contract.KeyInfo{}, err)
				return
			}
			for _, k := range p.Items {
				if !yield(k, nil) {
					return
				}
			}
			if !p.Truncated || p.NextCursor == "" {
				return
			}
			o.Cursor = p.NextCursor
		}
	}
}

// BatchGet reads keys in one request (POST /v1/kv:batchGet): 1 to
// contract.MaxBatchGetKeys keys, none twice, of any projects. Each item
// is one key's entry, as Get answers it, or its error (not_found,
// forbidden, partition_unavailable), in the order of keys; when the
// answer's byte budget cut it short (Truncated), only the first keys are
// answered: ask again for keys[len(Items):] (GetMany does). BatchGet is
// retried on 503 and network errors.
func (c *Client) BatchGet(ctx context.Context, keys []string) (contract.BatchGetAnswer, error) {
	body, err := marshal(contract.BatchGetBody{Keys: keys})
	if err != nil {
		return contract.BatchGetAnswer{}, err
	}
	var a contract.BatchGetAnswer
	_, err = c.do(ctx, call{method: http.MethodPost, path: "/v1/kv:batchGet", body: body, retry: true}, &a)
	return a, err
}

// GetMany reads any number of distinct keys with as few batch gets as
// it takes (contract.MaxBatchGetKeys keys each, again for the rest of a
// truncated answer) and returns one item per key, in the order of keys.
// A key's own error (not_found, forbidden, partition_unavailable) is in
// its item's Error (Item.Err returns it as an error); the error returned
// is the first request's that failed as a whole.
func (c *Client) GetMany(ctx context.Context, keys []string) ([]contract.BatchGetItem, error) {
	items := make([]contract.BatchGetItem, 0, len(keys))
	for len(items) < len(keys) {
		rest := keys[len(items):]
		a, err := c.BatchGet(ctx, rest[:min(len(rest), contract.MaxBatchGetKeys)])
		if err != nil {
			return items, err
		}
		if len(a.Items) == 0 {
			return items, &contract.Error{Code: contract.EInternal, Message: "a batch get answered no item"}
		}
		items = append(items, a.Items...)
	}
	return items, nil
}

// ItemErr is the error of a batch get's item as a *contract.Error (nil
// when the item holds the key's entry).
func ItemErr(it contract.BatchGetItem) error {
	if it.Error == nil {
		return nil
	}
	return it.Error.AsError(it.Key)
}

// ProjectsOptions select one page of the projects listing.
type ProjectsOptions struct {
	// Limit is the page size, 1..contract.MaxProjectsLimit; 0 means the
	// server's default (contract.DefaultProjectsLimit).
	Limit int
	// Cursor is the NextCursor of the previous page.
	Cursor string
}

// Projects returns one page of the projects the token may read keys of
// (GET /v1/projects), each with the count of its live keys the token may
// read, in key order. A project is listed once it holds such a key. The
// counts are the projection's, which may lag the latest writes by the
// projector's delay. Projects is retried on 503 and network errors.
func (c *Client) Projects(ctx context.Context, o ProjectsOptions) (contract.ProjectsAnswer, error) {
	q := url.Values{}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	var a contract.ProjectsAnswer
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/projects", query: q, retry: true}, &a); err != nil {
		return contract.ProjectsAnswer{}, err
	}
	if a.Items == nil {
		a.Items = []contract.ProjectInfo{}
	}
	return a, nil
}
