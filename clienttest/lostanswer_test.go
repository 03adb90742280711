package clienttest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
)

// loseFirstAnswer is an http.RoundTripper that sends every request to
// the server and, for the first, drops the answer the server gave: the
// write was applied, the client sees a timeout.
type loseFirstAnswer struct {
	tries atomic.Int32
}

func (l *loseFirstAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if l.tries.Add(1) > 1 || err != nil {
		return resp, err
	}
	resp.Body.Close()
	return nil, fmt.Errorf("the answer was lost: %w", os.ErrDeadlineExceeded)
}

// TestLostAnswerRetriedOnce: a write whose first try was applied but
// whose answer was lost is retried with the same requestId and answered
// as a replay of the first: the key's version moves by exactly one. A
// write without a requestId is not retried: the client cannot tell
// whether it was applied.
func TestLostAnswerRetriedOnce(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	ctx := t.Context()
	c := client.New(url, stack.DevToken)
	for _, tc := range []struct {
		name, key string
		requestID string
		tries     int32
	}{
		{"OKRetriedAsReplay", "with-id", "lost-answer-1", 2},
		{"ErrWithoutRequestIDNotRetried", "without-id", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := scope + "lost-answer/" + tc.key
			before, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`1`)})
			if err != nil {
				t.Fatal(err)
			}
			lossy := &loseFirstAnswer{}
			lc := client.New(url, stack.DevToken, client.WithHTTPClient(&http.Client{Transport: lossy}))
			res, err := lc.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`2`), RequestID: tc.requestID})
			after, gerr := c.Get(ctx, key)
			if gerr != nil {
				t.Fatal(gerr)
			}
			t.Logf("%d tries; replayed %v, err %v; version %d -> %d", lossy.tries.Load(), res.Replayed, err, before.Entry.Version, after.Version)
			if lossy.tries.Load() != tc.tries || after.Version != before.Entry.Version+1 || string(after.Value) != "2" {
				t.Fatalf("%d tries, version %d -> %d (value %s); want %d tries and the write applied once",
					lossy.tries.Load(), before.Entry.Version, after.Version, after.Value, tc.tries)
			}
			if tc.requestID == "" {
				if ne := (*client.NetworkError)(nil); !errors.As(err, &ne) {
					t.Fatalf("err %v; want the lost answer's *NetworkError", err)
				}
				return
			}
			if err != nil || !res.Replayed || res.Entry.Version != after.Version {
				t.Fatalf("retry: %+v, %v; want a replay of version %d", res, err, after.Version)
			}
		})
	}
}
