package client

import (
	"context"
	"iter"
	"net/url"
	"strconv"

	"github.com/eskv/eskv/contract"
)

// HistoryVersion is one version of a key in its history: the version,
// what made it (Kind, Op), the value after it (nil after a delete or an
// expire), the principal that wrote it, its requestId, time, transaction
// id and, for a collection, its element change.
type HistoryVersion = contract.HistoryVersion

// HistoryPage is one page of a key's history; Cursor continues it ("" after
// the last page).
type HistoryPage = contract.HistoryAnswer

// HistoryOptions select which versions of a key's history to read.
type HistoryOptions struct {
	// FromVersion is the first version (0 or 1: from the start). Versions
	// the server's history retention removed are not there.
	FromVersion int64
	// Limit is the page size, 1..1000; 0 means the server's default (100).
	// History pages on its own; Limit only sets the size of its pages.
	Limit int
	// Cursor is the Cursor of a previous page, to continue from it.
	Cursor string
}

// HistoryPage returns one page of the history of key, oldest version
// first. It sees every write acknowledged before it was sent. A key never
// written is contract.ENotFound; a caller without the read right on key
// gets contract.EForbidden. It is retried like Get.
func (c *Client) HistoryPage(ctx context.Context, key string, o HistoryOptions) (HistoryPage, error) {
	q := url.Values{}
	if o.FromVersion > 0 {
		q.Set("fromVersion", strconv.FormatInt(o.FromVersion, 10))
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	var a HistoryPage
	err := c.setRead(ctx, contract.OpHistory, key, q, &a)
	return a, err
}

// History iterates over the versions of key, oldest first, from
// o.FromVersion (or o.Cursor) on, fetching pages of o.Limit as it goes
// (each page is linearizable; the whole is not one snapshot: versions
// written meanwhile are included, a retention run meanwhile may remove
// some not read yet). On an error it yields the error once and stops.
func (c *Client) History(ctx context.Context, key string, o HistoryOptions) iter.Seq2[HistoryVersion, error] {
	return func(yield func(HistoryVersion, error) bool) {
		for {
			page, err := c.HistoryPage(ctx, key, o)
			if err != nil {
				yield(HistoryVersion{}, err)
				return
			}
			for _, v := range page.Versions {
				if !yield(v, nil) {
					return
				}
			}
			if page.Cursor == "" {
				return
			}
			o.Cursor = page.Cursor
		}
	}
}
