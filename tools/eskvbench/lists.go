package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
)

// Figure 14: lrange 0 99 on a list of 1,000 values and on one of
// 1,000,000 (docs/collections.md). A range is the list's metadata and
// one range scan of kv_elements' primary key over 100 positions, so its
// latency should not depend on the list's length: 14b is compared with
// 14a.
const (
	targetRangeP50 = 2 * time.Millisecond // a read that waits for the projection, as a listing
	listSmall      = 1000
	listLarge      = 1000000
	rangeN         = 100
)

// listRanges is figure 14 (sizeFigure). The values "v0" .. "v<n-1>" are
// loaded at positions 0 .. n-1 by one INSERT ... SELECT from
// generate_series (elemkey.ListPosition in SQL: position + 2^63 in 20
// digits). Every lrange is answered from Postgres (AwaitProjected returns
// at once: the writer acknowledged nothing of these lists).
func (b *bench) listRanges(ctx context.Context) []result {
	return b.sizeFigure(ctx, sizeFigure{
		steps: [2]string{"14a", "14b"}, sizes: [2]int{listSmall, listLarge},
		kind: "list", noun: "values", target: targetRangeP50,
		route: fmt.Sprintf("GET /v1/kv/{list}:lrange?start=0&stop=%d", rangeN-1),
		title: func(n int) string {
			return fmt.Sprintf("lrange 0 %d on a list of %s values, 1 client", rangeN-1, thousands(n))
		},
		load: func(ctx context.Context, list string, n int) error {
			return b.loadCollection(ctx, list, contract.PurposeList, contract.OpRPush,
				&contract.Element{Op: contract.ElementAdd, Member: elemkey.ListPosition(0), Value: json.RawMessage(`"v0"`)},
				`INSERT INTO kv_elements (collection, member, version, value)
				SELECT $1, lpad((i::numeric + 9223372036854775808)::text, 20, '0'), 1, '"v' || i || '"' FROM generate_series(1, $2 - 1) AS i`, n)
		},
		probe: func(ctx context.Context, list string, _ int, buf *bytes.Buffer) (int, bool, error) {
			var a contract.RangeAnswer
			status, err := b.getJSON(ctx, fmt.Sprintf("/v1/kv/%s:lrange?start=0&stop=%d", list, rangeN-1), buf, &a)
			return status, len(a.Values) == rangeN && string(a.Values[rangeN-1]) == fmt.Sprintf(`"v%d"`, rangeN-1), err
		},
	})
}
