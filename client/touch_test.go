package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// TestTouch: Touch posts {key}:touch with the TTL in seconds (or
// persist), and a touch with a requestId is retried and its replay
// reported.
func TestTouch(t *testing.T) {
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, r.Method+" "+r.URL.Path+" "+string(b))
		w.Header().Set("Content-Type", "application/json")
		if len(bodies) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"partition_unavailable","message":"moving"}}`))
			return
		}
		w.Header().Set("Eskv-Replayed", "true")
		_, _ = w.Write([]byte(`{"key":"` + scope + `k","value":1,"version":4}`))
	}))
	defer srv.Close()
	c := client.New(srv.URL, testToken, client.WithRetries(3, time.Millisecond, time.Millisecond))
	v := int64(3)
	res, err := c.Touch(t.Context(), client.TouchRequest{Key: scope + "k", TTL: 30 * time.Second, ExpectedVersion: &v, RequestID: "r"})
	if err != nil || !res.Replayed || res.Entry.Version != 4 || string(res.Entry.Value) != "1" {
		t.Fatalf("touch: %+v %v", res, err)
	}
	want := "POST /v1/kv/" + scope + `k:touch {"ttlSeconds":30,"expectedVersion":3,"requestId":"r"}`
	if len(bodies) != 2 || bodies[1] != want {
		t.Fatalf("sent %q, want twice %q", bodies, want)
	}
	if _, err := c.Touch(t.Context(), client.TouchRequest{Key: scope + "k", Persist: true}); err != nil || bodies[2] != "POST /v1/kv/"+scope+`k:touch {"persist":true}` {
		t.Fatalf("persist: %v, sent %q", err, bodies[len(bodies)-1])
	}
	for name, r := range map[string]client.TouchRequest{
		"ErrNeither": {Key: scope + "k"},
		"ErrBoth":    {Key: scope + "k", TTL: time.Second, Persist: true},
		"ErrPartial": {Key: scope + "k", TTL: 1500 * time.Millisecond},
	} {
		if _, err := c.Touch(t.Context(), r); contract.ErrorCode(err) != contract.EInvalid {
			t.Errorf("%s: %v, want invalid before sending", name, err)
		}
	}
	if len(bodies) != 3 {
		t.Fatalf("invalid touches were sent: %q", bodies[3:])
	}
}
