package clienttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestClientHistory: History iterates over every version of a key,
// oldest first, across pages of the given size (a delete in the middle
// has no value), from FromVersion on, and stops early when the loop
// breaks; a key never written is contract.ENotFound, a caller without read
// contract.EForbidden.
func TestClientHistory(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	ctx := t.Context()
	key := "tenant/acme/project/demo/client-history"
	for i := 1; i <= 5; i++ {
		if i == 3 {
			if _, err := c.Delete(ctx, key, client.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	walk := func(o client.HistoryOptions, stopAfter int) string {
		var got []string
		for v, err := range c.History(ctx, key, o) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%d:%s:%s", v.Version, v.Op, v.Value))
			if len(got) == stopAfter {
				break
			}
		}
		return strings.Join(got, " ")
	}
	const all = "1:set:1 2:set:2 3:delete: 4:set:4 5:set:5"
	for _, limit := range []int{0, 1, 2, 1000} {
		if got := walk(client.HistoryOptions{Limit: limit}, 0); got != all {
			t.Fatalf("limit %d: %s, want %s", limit, got, all)
		}
	}
	if got := walk(client.HistoryOptions{FromVersion: 3, Limit: 2}, 0); got != "3:delete: 4:set:4 5:set:5" {
		t.Fatalf("from version 3: %s", got)
	}
	if got := walk(client.HistoryOptions{Limit: 1}, 2); got != "1:set:1 2:set:2" {
		t.Fatalf("stopped after two: %s", got)
	}
	page, err := c.HistoryPage(ctx, key, client.HistoryOptions{Limit: 4})
	if err != nil || len(page.Versions) != 4 || page.Cursor == "" {
		t.Fatalf("page of 4: %+v %v", page, err)
	}
	for _, tc := range []struct {
		c    *client.Client
		key  string
		code string
	}{
		{c, key + "-never", contract.ENotFound},
		{client.New(url, stack.WriterToken), key, contract.EForbidden},
	} {
		var errs []error
		for _, err := range tc.c.History(ctx, tc.key, client.HistoryOptions{}) {
			errs = append(errs, err)
		}
		if e, ok := errors.AsType[*contract.Error](errors.Join(errs...)); len(errs) != 1 || !ok || e.Code != tc.code {
			t.Fatalf("history of %s: %v, want one %s", tc.key, errs, tc.code)
		}
	}
}
