// Package clienttest runs the Go client (module github.com/eskv/eskv/client)
// against eskv itself: in-process stacks (testenv/stack) with the writer,
// its HTTP API and the projector. The client's module cannot import the
// server, so its own tests use in-memory transports; these are the ones
// that need a real server.
package clienttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

const scope = "tenant/acme/project/demo/"

// TestClient runs the client against one in-process stack.
func TestClient(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	ctx := t.Context()

	t.Run("Txn", func(t *testing.T) {
		a, b := scope+"txn/a", scope+"txn/b"
		by := int64(5)
		body := contract.TxnBody{RequestID: "t1", Ops: []contract.TxnOp{
			{Op: contract.OpIncrement, Key: a, By: &by, Create: true},
			{Op: contract.OpPut, Key: b, Value: json.RawMessage(`"x"`), Condition: &contract.Condition{Exists: new(false)}},
		}}
		ans, err := c.Txn(ctx, body)
		if err != nil || ans.Replayed || ans.TxnID == "" || len(ans.Results) != 2 || string(ans.Results[0].Value) != "5" || ans.Results[1].Version != 1 {
			t.Fatalf("txn: %+v, %v", ans, err)
		}
		again, err := c.Txn(ctx, body)
		if err != nil || !again.Replayed || again.TxnID != ans.TxnID {
			t.Fatalf("retry: %+v, %v", again, err)
		}
		body.RequestID = ""
		_, err = c.Txn(ctx, body)
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EConflict || e.FailedOp == nil || *e.FailedOp != 1 || e.Current == nil ||
			e.Current.Key != b || e.Current.Version != 1 || string(e.Current.Value) != `"x"` {
			t.Fatalf("failing condition: %v (current %+v)", err, e)
		}
	})

	t.Run("IncrementBounds", func(t *testing.T) {
		key := scope + "quota"
		if res, err := c.Increment(ctx, client.IncrementRequest{Key: key, By: 2, Create: true, Max: new(int64(2))}); err != nil || res.Value != 2 {
			t.Fatalf("create within max: %+v, %v", res, err)
		}
		_, err := c.Increment(ctx, client.IncrementRequest{Key: key, By: 1, Max: new(int64(2))})
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EOutOfRange || e.Field != "max" || e.Current == nil || e.Current.Version != 1 || string(e.Current.Value) != "2" {
			t.Fatalf("above max: want out_of_range on max with the counter, got %#v", err)
		}
		for want := int64(1); want >= 0; want-- {
			if res, err := c.Increment(ctx, client.IncrementRequest{Key: key, By: -1, Min: new(int64(0))}); err != nil || res.Value != want {
				t.Fatalf("decrement to %d: %+v, %v", want, res, err)
			}
		}
		if _, err := c.Increment(ctx, client.IncrementRequest{Key: key, By: -1, Min: new(int64(0))}); !errors.As(err, &e) || e.Field != "min" || e.Current.Version != 3 {
			t.Fatalf("below min: %#v", err)
		}
		// In a transaction the bound fails its op, and nothing applies.
		other := scope + "quota-other"
		_, err = c.Txn(ctx, contract.TxnBody{Ops: []contract.TxnOp{
			{Op: contract.OpIncrement, Key: other, By: new(int64(1)), Create: true},
			{Op: contract.OpIncrement, Key: key, By: new(int64(-1)), Min: new(int64(0))},
		}})
		if !errors.As(err, &e) || e.Code != contract.EOutOfRange || e.Field != "ops[1].min" || e.FailedOp == nil || *e.FailedOp != 1 {
			t.Fatalf("txn below min: %#v", err)
		}
		// The writer decides on its own state, not the projection's: an
		// increment without create finds the key absent.
		if _, err := c.Increment(ctx, client.IncrementRequest{Key: other}); contract.ErrorCode(err) != contract.ENotFound {
			t.Fatalf("the transaction's other op applied: %v", err)
		}
	})

	t.Run("PutGetDelete", func(t *testing.T) {
		key := scope + "checkpoint"
		res, err := c.Put(ctx, client.PutRequest{
			Key: key, Value: json.RawMessage(`{"cursor": 1}`), ExpectedVersion: new(int64(0)),
			Semantics: contract.Semantics{Purpose: "checkpoint", Producer: "harvester", ConsumerHints: []string{"reporting"}},
			RequestID: "r1", SpecRef: "adr-7",
		})
		if err != nil {
			t.Fatal(err)
		}
		e := res.Entry
		if res.Replayed || e.Key != key || e.Version != 1 || string(e.Value) != `{"cursor":1}` || e.LastWriter != "dev" ||
			e.Semantics.Purpose != "checkpoint" || e.Semantics.ConsumerHints[0] != "reporting" || e.RequestID != "r1" || e.SpecRef != "adr-7" {
			t.Fatalf("create answered %+v", res)
		}
		got, err := c.Get(ctx, key)
		if err != nil || got.Version != 1 || !got.UpdatedAt.Equal(e.UpdatedAt) {
			t.Fatalf("get: %+v, %v", got, err)
		}
		if res, err = c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`2`), ExpectedVersion: new(int64(1))}); err != nil || res.Entry.Version != 2 {
			t.Fatalf("cas: %+v, %v", res, err)
		}
		d, err := c.Delete(ctx, key, client.DeleteOptions{ExpectedVersion: new(int64(2))})
		if err != nil || d != (client.DeleteResult{Key: key, Version: 3, Deleted: true}) {
			t.Fatalf("delete: %+v, %v", d, err)
		}
		if _, err := c.Get(ctx, key); contract.ErrorCode(err) != contract.ENotFound {
			t.Fatalf("get after delete: want not_found, got %v", err)
		}
		if _, err := c.Delete(ctx, key, client.DeleteOptions{}); contract.ErrorCode(err) != contract.ENotFound {
			t.Fatalf("delete of an absent key: want not_found, got %v", err)
		}
	})

	t.Run("ErrConflictCarriesCurrent", func(t *testing.T) {
		key := scope + "cas"
		if _, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`"a"`)}); err != nil {
			t.Fatal(err)
		}
		_, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`"b"`), ExpectedVersion: new(int64(0))})
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EConflict || e.Field != "expectedVersion" || e.CorrelationID == "" ||
			e.Current == nil || e.Current.Key != key || e.Current.Version != 1 || string(e.Current.Value) != `"a"` {
			t.Fatalf("want a conflict with the current entry, got %#v", err)
		}
		_, err = c.Delete(ctx, key, client.DeleteOptions{ExpectedVersion: new(int64(7))})
		if !errors.As(err, &e) || e.Code != contract.EConflict || e.Current == nil || e.Current.Version != 1 {
			t.Fatalf("stale delete: want a conflict at version 1, got %#v", err)
		}
	})

	t.Run("ErrConflictOnAbsentKeyHasNoCurrent", func(t *testing.T) {
		_, err := c.Put(ctx, client.PutRequest{Key: scope + "never", Value: json.RawMessage(`1`), ExpectedVersion: new(int64(3))})
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EConflict || e.Current != nil {
			t.Fatalf("want a conflict without current entry, got %#v", err)
		}
	})

	t.Run("ReplayedRequestID", func(t *testing.T) {
		r := client.PutRequest{Key: scope + "idem", Value: json.RawMessage(`{"n":1}`), RequestID: "job-42"}
		first, err := c.Put(ctx, r)
		if err != nil || first.Replayed {
			t.Fatalf("first: %+v, %v", first, err)
		}
		again, err := c.Put(ctx, r)
		if err != nil || !again.Replayed || again.Entry.Version != first.Entry.Version {
			t.Fatalf("replay: %+v, %v", again, err)
		}
		r.Value = json.RawMessage(`{"n":2}`)
		var e *contract.Error
		if _, err := c.Put(ctx, r); !errors.As(err, &e) || e.Code != contract.EConflict || e.Field != "requestId" {
			t.Fatalf("requestId reused for another body: %v", err)
		}
	})

	t.Run("TTL", func(t *testing.T) {
		res, err := c.Put(ctx, client.PutRequest{Key: scope + "lease", Value: json.RawMessage(`"me"`), TTL: time.Hour})
		if err != nil || res.Entry.ExpiresAt == nil || res.Entry.ExpiresAt.Sub(res.Entry.UpdatedAt) != time.Hour || res.Entry.Semantics.TTLSeconds != 3600 {
			t.Fatalf("put with TTL: %+v, %v", res, err)
		}
	})

	for _, tc := range []struct {
		name, token string
		req         client.PutRequest
		code, field string
	}{
		{"ErrBadKey", stack.DevToken, client.PutRequest{Key: "tenant/acme/project/demo/Upper", Value: json.RawMessage(`1`)}, contract.EInvalid, "key"},
		{"ErrKeyWithSpace", stack.DevToken, client.PutRequest{Key: "tenant/acme/project/demo/a b", Value: json.RawMessage(`1`)}, contract.EInvalid, "key"},
		{"ErrEmptyKey", stack.DevToken, client.PutRequest{Value: json.RawMessage(`1`)}, contract.EInvalid, "key"},
		{"ErrValueNotJSON", stack.DevToken, client.PutRequest{Key: scope + "x", Value: json.RawMessage(`hello`)}, contract.EInvalid, "value"},
		{"ErrSubSecondTTL", stack.DevToken, client.PutRequest{Key: scope + "x", Value: json.RawMessage(`1`), TTL: 1500 * time.Millisecond}, contract.EInvalid, "ttlSeconds"},
		{"ErrPurpose", stack.DevToken, client.PutRequest{Key: scope + "x", Value: json.RawMessage(`1`), Semantics: contract.Semantics{Purpose: "nope"}}, contract.EInvalid, "semantics.purpose"},
		{"ErrNoToken", "", client.PutRequest{Key: scope + "x", Value: json.RawMessage(`1`)}, contract.EUnauthenticated, ""},
		{"ErrReaderWrites", stack.ReaderToken, client.PutRequest{Key: scope + "x", Value: json.RawMessage(`1`)}, contract.EForbidden, "key"},
		{"ErrTooLarge", stack.DevToken, client.PutRequest{Key: scope + "x", Value: json.RawMessage(`"` + strings.Repeat("a", 70000) + `"`)}, contract.ETooLarge, "value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := client.New(url, tc.token).Put(ctx, tc.req)
			var e *contract.Error
			if !errors.As(err, &e) || e.Code != tc.code || e.Field != tc.field {
				t.Fatalf("want %s on field %q, got %#v", tc.code, tc.field, err)
			}
		})
	}

	t.Run("ListPagesAndListAll", func(t *testing.T) {
		const n = 7
		for i := range n {
			if _, err := c.Put(ctx, client.PutRequest{Key: fmt.Sprintf("%sjobs/%02d", scope, i), Value: json.RawMessage(fmt.Sprint(i))}); err != nil {
				t.Fatal(err)
			}
		}
		o := client.ListOptions{Prefix: scope + "jobs/", Limit: 3}
		stack.WaitFor(t, "the projection to hold every job", func() bool {
			got := 0
			for _, err := range c.ListAll(ctx, o) {
				if err != nil {
					t.Fatal(err)
				}
				got++
			}
			return got == n
		})
		page, err := c.List(ctx, o)
		if err != nil || len(page.Items) != 3 || !page.Truncated || page.NextCursor == "" || page.Items[0].Key != scope+"jobs/00" {
			t.Fatalf("first page: %+v, %v", page, err)
		}
		i := 0
		for e, err := range c.ListAll(ctx, o) {
			if err != nil {
				t.Fatal(err)
			}
			if want := fmt.Sprintf("%sjobs/%02d", scope, i); e.Key != want || string(e.Value) != fmt.Sprint(i) {
				t.Fatalf("entry %d: want %s=%d, got %s=%s", i, want, i, e.Key, e.Value)
			}
			i++
		}
		empty, err := c.List(ctx, client.ListOptions{Prefix: scope + "nothing/"})
		if err != nil || empty.Items == nil || len(empty.Items) != 0 || empty.Truncated {
			t.Fatalf("empty listing: %+v, %v", empty, err)
		}
	})

	t.Run("ErrListOutsideScope", func(t *testing.T) {
		_, err := c.List(ctx, client.ListOptions{Prefix: "tenant/acme/"})
		var e *contract.Error
		if !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != "prefix" {
			t.Fatalf("want invalid prefix, got %#v", err)
		}
		for _, err := range c.ListAll(ctx, client.ListOptions{Prefix: scope, Cursor: "not-a-cursor"}) {
			if contract.ErrorCode(err) != contract.EInvalid {
				t.Fatalf("ListAll with a bad cursor: want invalid, got %v", err)
			}
		}
	})
}
