package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"time"

	"github.com/eskv/eskv/contract"
)

// Figure 13: sismember on a set of 1,000 members and on one of 1,000,000
// (docs/collections.md). A membership test is one primary-key probe of
// kv_elements, so its latency should not depend on the set's size: 13b
// is compared with 13a.
const (
	targetSetP50 = time.Millisecond // as a GET (figure 3a)
	setSmall     = 1000
	setLarge     = 1000000
)

// sets is figure 13 (sizeFigure). The members are loaded by one INSERT
// ... SELECT from generate_series (a million sadds through the writer
// would take minutes). The writer has never seen the sets: every
// sismember reads the set's entry and probes the member in Postgres, its
// slowest path. Half the probes ask for a member that is not there.
func (b *bench) sets(ctx context.Context) []result {
	var rng *rand.Rand
	rngFor := 0
	return b.sizeFigure(ctx, sizeFigure{
		steps: [2]string{"13a", "13b"}, sizes: [2]int{setSmall, setLarge},
		kind: "set", noun: "members", target: targetSetP50,
		route: "GET /v1/kv/{set}:sismember?member=",
		title: func(n int) string {
			return fmt.Sprintf("sismember on a set of %s members (half present), 1 client", thousands(n))
		},
		load: func(ctx context.Context, set string, n int) error {
			return b.loadCollection(ctx, set, contract.PurposeSet, contract.OpSAdd,
				&contract.Element{Op: contract.ElementAdd, Member: setMember(0)},
				`INSERT INTO kv_elements (collection, member, version)
				SELECT $1, 'member-' || lpad(i::text, 8, '0'), 1 FROM generate_series(1, $2 - 1) AS i`, n)
		},
		probe: func(ctx context.Context, set string, n int, buf *bytes.Buffer) (int, bool, error) {
			if rng == nil || rngFor != n {
				rng, rngFor = rand.New(rand.NewPCG(uint64(n), 13)), n
			}
			i := rng.IntN(n)
			member, want := setMember(i), true
			if rng.IntN(2) == 0 {
				member, want = "absent-"+setMember(i), false
			}
			var a contract.IsMemberAnswer
			status, err := b.getJSON(ctx, "/v1/kv/"+set+":sismember?member="+url.QueryEscape(member), buf, &a)
			return status, a.IsMember == want, err
		},
	})
}

// setMember is the i-th member of a loaded set: byte order is i's order.
func setMember(i int) string { return fmt.Sprintf("member-%08d", i) }
