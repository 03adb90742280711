package client

import (
	"context"
	"net/http"

	"github.com/eskv/eskv/contract"
)

// DeleteRangeRequest deletes every key under a prefix of one project
// (etcd's del --prefix, Consul's kv delete -recurse).
type DeleteRangeRequest struct {
	// Prefix is a string prefix starting with tenant/<t>/project/<p>/.
	Prefix string
	// Chunked deletes at most contract.MaxRangeKeys keys and answers
	// Truncated when more may be left; without it a prefix over that
	// many keys is refused contract.ETooManyKeys and nothing is deleted.
	Chunked bool
	// Cursor is a chunked answer's NextCursor, to continue after it.
	Cursor string
}

// DeleteRange deletes the keys under r.Prefix, whatever they are for
// (locks and leaderships broken, collections whole), in one transaction
// of delete events, and answers how many it deleted. It needs the write
// right on every key under the prefix. It is not retried: a retry would
// delete what was written under the prefix meanwhile.
func (c *Client) DeleteRange(ctx context.Context, r DeleteRangeRequest) (contract.PrefixAnswer, error) {
	b := contract.DeleteRangeBody{Prefix: r.Prefix, Chunked: r.Chunked, Cursor: r.Cursor}
	if err := b.Validate(); err != nil {
		return contract.PrefixAnswer{}, err
	}
	return c.prefixWrite(ctx, "/v1/kv:deleteRange", b, false)
}

// DeleteRangeAll deletes every key under prefix in chunks of at most
// contract.MaxRangeKeys (each chunk atomic, the whole not) and answers
// the total count.
func (c *Client) DeleteRangeAll(ctx context.Context, prefix string) (int, error) {
	total, cursor := 0, ""
	for {
		a, err := c.DeleteRange(ctx, DeleteRangeRequest{Prefix: prefix, Chunked: true, Cursor: cursor})
		total += a.Count
		if err != nil || !a.Truncated {
			return total, err
		}
		cursor = a.NextCursor
	}
}

// ExpireDue expires now the keys under prefix past their expiry, with
// the expire events the TTL sweeper appends, at most
// contract.MaxRangeKeys of them after cursor (""), and answers how many
// (Truncated when more may be due). Safe to retry: it only removes what
// is past its expiry.
func (c *Client) ExpireDue(ctx context.Context, prefix, cursor string) (contract.PrefixAnswer, error) {
	b := contract.ExpireDueBody{Prefix: prefix, Cursor: cursor}
	if err := b.Validate(); err != nil {
		return contract.PrefixAnswer{}, err
	}
	return c.prefixWrite(ctx, "/v1/kv:expireDue", b, true)
}

// ExpireDueAll expires now every key under prefix past its expiry, an
// ExpireDue call (at most contract.MaxRangeKeys keys) after another until
// one is not truncated, and answers the total count: a cleanup of what
// is due that does not wait for the sweeper. Each call is retried; the
// whole is not atomic (the sweeper may expire some keys meanwhile, and
// they are not counted).
func (c *Client) ExpireDueAll(ctx context.Context, prefix string) (int, error) {
	total, cursor := 0, ""
	for {
		a, err := c.ExpireDue(ctx, prefix, cursor)
		total += a.Count
		if err != nil || !a.Truncated {
			return total, err
		}
		cursor = a.NextCursor
	}
}

// prefixWrite posts the body of a prefix write to path.
func (c *Client) prefixWrite(ctx context.Context, path string, b any, retry bool) (contract.PrefixAnswer, error) {
	body, err := marshal(b)
	if err != nil {
		return contract.PrefixAnswer{}, err
	}
	var a contract.PrefixAnswer
	_, err = c.do(ctx, call{method: http.MethodPost, path: path, body: body, retry: retry}, &a)
	return a, err
}
