package clienttest

import (
	"context"
	"fmt"
	"log"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestClientSets runs the set methods against an in-process stack: adds
// and removes report whether they changed the set, a retried request with
// its requestId is a replay, members of any content page in byte order,
// a write-only caller learns neither membership nor size, and the TTL
// expires the whole set.
func TestClientSets(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	ctx := t.Context()
	set := "tenant/acme/project/demo/client-set"
	members := []string{"b", "a/b?c#d", "é", "a"}
	for _, m := range members {
		if a, err := c.SAdd(ctx, client.SetRequest{Key: set, Member: m}); err != nil || a.Added == nil || !*a.Added {
			t.Fatalf("sadd %q: %+v %v", m, a, err)
		}
	}
	if a, err := c.SAdd(ctx, client.SetRequest{Key: set, Member: "a"}); err != nil || *a.Added || a.Size != 4 || a.Version != 4 {
		t.Fatalf("sadd of a present member: %+v %v, want added false at version 4", a, err)
	}
	// A retry of the same request (same requestId) is answered as a replay.
	r := client.SetRequest{Key: set, Member: "z", RequestID: "add-z"}
	first, err := c.SAdd(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := c.SAdd(ctx, r); err != nil || again.Version != first.Version || !*again.Added {
		t.Fatalf("retry: %+v %v, want the first answer %+v", again, err, first)
	}
	if a, err := c.SRem(ctx, client.SetRequest{Key: set, Member: "z"}); err != nil || !*a.Removed || a.Size != 4 {
		t.Fatalf("srem: %+v %v", a, err)
	}
	var got []string
	for _, limit := range []int{1, 3, 0} {
		got = got[:0]
		cursor := ""
		for {
			page, err := c.SMembersPage(ctx, set, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.Members...)
			if cursor = page.Cursor; cursor == "" {
				break
			}
		}
		if want := slices.Sorted(slices.Values(members)); !slices.Equal(got, want) {
			t.Fatalf("pages of %d: %q, want %q", limit, got, want)
		}
	}
	if in, err := c.SIsMember(ctx, set, "a/b?c#d"); err != nil || !in {
		t.Fatalf("sismember: %v %v", in, err)
	}
	if n, err := c.SCard(ctx, set); err != nil || n != 4 {
		t.Fatalf("scard %d %v", n, err)
	}

	t.Run("ErrNotASet", func(t *testing.T) {
		if _, err := c.Put(ctx, client.PutRequest{Key: set + "-plain", Value: []byte(`1`)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.SIsMember(ctx, set+"-plain", "a"); contract.ErrorCode(err) != contract.EWrongType {
			t.Fatalf("sismember of a plain key: %v", err)
		}
		if _, err := c.Put(ctx, client.PutRequest{Key: set, Value: []byte(`1`)}); contract.ErrorCode(err) != contract.EWrongType {
			t.Fatalf("put over a set: %v", err)
		}
	})
	t.Run("ErrLocalValidation", func(t *testing.T) {
		if _, err := c.SAdd(ctx, client.SetRequest{Key: set}); contract.ErrorCode(err) != contract.EInvalid {
			t.Fatalf("empty member: %v", err)
		}
	})
	t.Run("OKDeleteRemovesTheWholeSet", func(t *testing.T) {
		other := set + "-deleted"
		for _, m := range []string{"x", "y"} {
			if _, err := c.SAdd(ctx, client.SetRequest{Key: other, Member: m}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Delete(ctx, other, client.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if a, err := c.SAdd(ctx, client.SetRequest{Key: other, Member: "y"}); err != nil || !*a.Added || a.Size != 1 {
			t.Fatalf("sadd after delete: %+v %v, want a new set of 1", a, err)
		}
		if in, err := c.SIsMember(ctx, other, "x"); err != nil || in {
			t.Fatalf("x is still a member after the delete: %v %v", in, err)
		}
		page, err := c.SMembersPage(ctx, other, "", 0)
		if err != nil || !slices.Equal(page.Members, []string{"y"}) {
			t.Fatalf("members %+v %v, want [y]", page, err)
		}
	})
	t.Run("OKTTLExpiresTheSet", func(t *testing.T) {
		other := set + "-ttl"
		if _, err := c.SAdd(ctx, client.SetRequest{Key: other, Member: "x", TTL: time.Second}); err != nil {
			t.Fatal(err)
		}
		stack.WaitFor(t, "the set to expire", func() bool {
			n, err := c.SCard(ctx, other)
			return err == nil && n == 0
		})
		if in, err := c.SIsMember(ctx, other, "x"); err != nil || in {
			t.Fatalf("member of an expired set: %v %v", in, err)
		}
	})
}

// ExampleClient_SIsMember is the seed's deduplication use case: skip a
// message already processed, mark it once processed.
func ExampleClient_SIsMember() {
	c := client.New("http://127.0.0.1:8080", os.Getenv("KVCTL_TOKEN"))
	ctx := context.Background()
	const set, id = "tenant/acme/project/demo/processed-messages", "msg-abc-123"
	seen, err := c.SIsMember(ctx, set, id)
	if err != nil {
		log.Fatal(err)
	}
	if seen {
		fmt.Println("already processed, skipping")
		return
	}
	// ... process the message ...
	if _, err := c.SAdd(ctx, client.SetRequest{Key: set, Member: id}); err != nil {
		log.Fatal(err)
	}
}
