package stash_test

import (
	"context"
	"slices"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/stash"
	"github.com/eskv/eskv/testenv/stack"
)

// TestScansDeclareTheirFields: a table's first filtered fetch declares
// the fields its scans compare, keeping those the project declared
// before, and finds what it finds without them.
func TestScansDeclareTheirFields(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	ctx := context.Background()
	if _, err := c.SetFieldIndexes(ctx, project, []string{"mine"}, nil); err != nil {
		t.Fatal(err)
	}
	tb, err := stash.Open(url, stack.DevToken, project)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, tb, "a", "counter", map[string]any{"value": 1})
	if got := mustFetch(t, tb, map[string]any{"stash_type": "counter"}); len(got) != 1 {
		t.Fatalf("fetched %v", got)
	}
	fields, _, err := c.FieldIndexes(ctx, project)
	if err != nil || !slices.Equal(fields, []string{"mine", "name", "stashType", "trailId"}) {
		t.Errorf("declared %v, %v; want the stash's fields and the project's own", fields, err)
	}
}
