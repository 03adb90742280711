package client

import (
	"context"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/eskv/eskv/contract"
)

// Sets (docs/collections.md): a set is one key; its members are strings
// of any content (up to contract.MaxMemberBytes bytes of UTF-8).

// SetRequest adds or removes one member of the set at Key.
type SetRequest struct {
	// Key is the set's key.
	Key string
	// Member is the member added or removed.
	Member string
	// ExpectedVersion, when set, is the version the set must have (0:
	// must not exist).
	ExpectedVersion *int64
	// TTL, on SAdd, expires the whole set this long after the write; 0
	// keeps its expiry.
	TTL time.Duration
	// RequestID makes the request idempotent; when empty the client
	// gives it one, so a retry after a lost answer is never applied
	// twice (it is answered as a replay).
	RequestID string
}

// SetChange is the answer of SAdd and SRem. Added (Removed) is false
// when the member was already there (already absent): nothing was
// written. Both, and Size, are nil and 0 for a caller without the read
// right.
type SetChange = contract.SetChangeAnswer

// SAdd adds r.Member to the set at r.Key, creating the set.
func (c *Client) SAdd(ctx context.Context, r SetRequest) (SetChange, error) {
	return c.setCall(ctx, contract.OpSAdd, r)
}

// SRem removes r.Member from the set at r.Key.
func (c *Client) SRem(ctx context.Context, r SetRequest) (SetChange, error) {
	return c.setCall(ctx, contract.OpSRem, r)
}

func (c *Client) setCall(ctx context.Context, op contract.Op, r SetRequest) (SetChange, error) {
	b := contract.MemberBody{Member: r.Member, ExpectedVersion: r.ExpectedVersion, RequestID: r.RequestID}
	if b.RequestID == "" {
		b.RequestID = newRequestID()
	}
	if r.TTL != 0 {
		ttl, err := ttlSeconds(r.TTL)
		if err != nil {
			return SetChange{}, err
		}
		b.TTLSeconds = ttl
	}
	if err := b.Validate(); err != nil {
		return SetChange{}, err
	}
	a, _, err := Call[SetChange](ctx, c, op, r.Key, &b)
	return a, err
}

// SIsMember reports whether member belongs to the set at key (false for a
// missing set). A key that is not a set is contract.EWrongType.
func (c *Client) SIsMember(ctx context.Context, key, member string) (bool, error) {
	if err := contract.ValidateMember("member", member); err != nil {
		return false, err
	}
	var a contract.IsMemberAnswer
	err := c.setRead(ctx, contract.OpSIsMember, key, url.Values{"member": {member}}, &a)
	return a.IsMember, err
}

// SCard returns the size of the set at key (0 for a missing set).
func (c *Client) SCard(ctx context.Context, key string) (int64, error) {
	var a contract.CardAnswer
	err := c.setRead(ctx, contract.OpSCard, key, nil, &a)
	return a.Size, err
}

// SMembersPage returns up to limit members (0: the server's default) of
// the set at key after cursor ("" for the first page), in byte order; its
// Cursor continues, "" after the last page.
func (c *Client) SMembersPage(ctx context.Context, key, cursor string, limit int) (contract.MembersAnswer, error) {
	q := url.Values{}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var a contract.MembersAnswer
	err := c.setRead(ctx, contract.OpSMembers, key, q, &a)
	return a, err
}

// SMembers iterates over every member of the set at key, a page at a
// time (each page is linearizable; the whole is not one snapshot).
func (c *Client) SMembers(ctx context.Context, key string) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		cursor := ""
		for {
			page, err := c.SMembersPage(ctx, key, cursor, contract.MaxListLimit)
			if err != nil {
				yield("", err)
				return
			}
			for _, m := range page.Members {
				if !yield(m, nil) {
					return
				}
			}
			if page.Cursor == "" {
				return
			}
			cursor = page.Cursor
		}
	}
}

func (c *Client) setRead(ctx context.Context, op contract.Op, key string, q url.Values, out any) error {
	p, err := keyPath(key)
	if err != nil {
		return err
	}
	_, err = c.do(ctx, call{method: http.MethodGet, path: p + ":" + op.Verb(), query: q, key: key, retry: true}, out)
	return err
}
