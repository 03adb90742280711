package clienttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestReadsOfManyKeys: ListKeys, BatchGet, GetMany and Projects through
// the whole stack.
func TestReadsOfManyKeys(t *testing.T) {
	t.Parallel()
	base := stack.MustStart(t)
	c := client.New(base, stack.DevToken)
	ctx := t.Context()
	const dir = scope + "many/"
	var keys []string
	for i := range 5 {
		k := fmt.Sprintf("%sk%d", dir, i)
		if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(fmt.Sprint(i)), Semantics: contract.Semantics{Purpose: "config"}}); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	page, err := c.ListKeys(ctx, client.ListOptions{Prefix: dir, Limit: 2})
	if err != nil || len(page.Items) != 2 || !page.Truncated || page.Items[0].Purpose != "config" {
		t.Fatalf("ListKeys = %+v, %v", page, err)
	}
	var all []string
	for k, err := range c.ListKeysAll(ctx, client.ListOptions{Prefix: dir, Limit: 2}) {
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, k.Key)
	}
	if fmt.Sprint(all) != fmt.Sprint(keys) {
		t.Errorf("ListKeysAll = %v, want %v", all, keys)
	}
	asked := append([]string{dir + "missing"}, keys...)
	items, err := c.GetMany(ctx, asked)
	if err != nil || len(items) != len(asked) {
		t.Fatalf("GetMany = %+v, %v", items, err)
	}
	if err := client.ItemErr(items[0]); !isCode(err, contract.ENotFound) {
		t.Errorf("the missing key's error = %v, want not_found", err)
	}
	for i, it := range items[1:] {
		if client.ItemErr(it) != nil || it.Entry == nil || string(it.Entry.Value) != fmt.Sprint(i) {
			t.Errorf("item %d = %+v", i+1, it)
		}
	}
	if _, err := c.BatchGet(ctx, []string{dir + "a", dir + "a"}); !isCode(err, contract.EInvalid) {
		t.Errorf("BatchGet of a key twice: %v, want invalid", err)
	}
	stack.WaitFor(t, "the projects listing to count the keys", func() bool {
		p, err := c.Projects(ctx, client.ProjectsOptions{})
		for _, it := range p.Items {
			if it.Scope()+"/" == scope && it.Keys >= 5 {
				return err == nil
			}
		}
		return false
	})
}

func isCode(err error, code string) bool {
	var e *contract.Error
	return errors.As(err, &e) && e.Code == code
}
