package clienttest

import (
	"encoding/json"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestClientPopRetry: a pop retried with its requestId (as the client
// retries one whose answer was lost) is answered as a replay with the
// value the pop removed, the list's length and version after it, and
// leaves the list as it was: while the pop is unprojected (the writer's
// overlay holds it) and once the projection holds it (kv_history does).
func TestClientPopRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []stack.Option
		projected bool
	}{
		{"Unprojected", []stack.Option{stack.WithoutProjector()}, false},
		{"Projected", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := stack.MustRun(t, tc.opts...)
			c := client.New(s.URL, stack.DevToken)
			ctx := t.Context()
			list := "tenant/acme/project/demo/jobs"
			for _, v := range []string{`"a"`, `{"job":"b"}`, `"c"`} {
				if _, err := c.RPush(ctx, client.PushRequest{Key: list, Value: json.RawMessage(v)}); err != nil {
					t.Fatal(err)
				}
			}
			pop := func(op contract.Op, id string) (client.ListChange, bool) {
				t.Helper()
				a, replayed, err := client.Call[client.ListChange](ctx, c, op, list, &contract.PopBody{RequestID: id})
				if err != nil {
					t.Fatalf("%s %s: %v", op, id, err)
				}
				return a, replayed
			}
			first, replayed := pop(contract.OpLPop, "pop-1")
			if replayed || string(first.Value) != `"a"` || first.Length != 2 || first.Version != 4 {
				t.Fatalf("lpop: %+v replayed %v, want \"a\" length 2 version 4", first, replayed)
			}
			if tc.projected {
				if _, err := s.Writer.AwaitProjected(ctx, list); err != nil {
					t.Fatal(err) // the overlay no longer holds the pop
				}
			}
			again, replayed := pop(contract.OpLPop, "pop-1")
			if !replayed || string(again.Value) != string(first.Value) || again.Length != first.Length || again.Version != first.Version {
				t.Fatalf("retry: %+v replayed %v, want the first answer %+v replayed", again, replayed, first)
			}
			if tc.projected {
				r, err := c.LRange(ctx, list, 0, -1)
				if err != nil || len(r.Values) != 2 || string(r.Values[0]) != `{"job":"b"}` {
					t.Fatalf("lrange after the retries: %+v %v, want [b c]", r, err)
				}
			}
			// The retries removed nothing: the next pop takes "b".
			if next, replayed := pop(contract.OpLPop, "pop-2"); replayed || string(next.Value) != `{"job":"b"}` || next.Length != 1 || next.Version != 5 {
				t.Fatalf("next lpop: %+v replayed %v, want b length 1 version 5", next, replayed)
			}
		})
	}
}
