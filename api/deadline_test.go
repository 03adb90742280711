package api_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/watch"
	"github.com/eskv/eskv/writer"
)

// hungWriter is a writer whose dependencies stopped answering: reads wait
// for their context, as a driver does, and end with its error; a write
// waits too and then says its outcome is unknown, as writer.Writer.Do
// does for a write it queued.
type hungWriter struct{ fakeWriter }

func (hungWriter) State(ctx context.Context, _ contract.Key) (keystate.State, error) {
	<-ctx.Done()
	return keystate.State{}, fmt.Errorf("projection: state: %w", ctx.Err())
}

func (w hungWriter) StateAt(ctx context.Context, k contract.Key) (keystate.State, contract.Cursor, error) {
	st, err := w.State(ctx, k)
	return st, contract.Cursor{}, err
}

func (hungWriter) Do(ctx context.Context, c decide.Command) (writer.Result, error) {
	<-ctx.Done()
	return writer.Result{}, &contract.Error{Code: contract.EOutcomeUnknown, RequestID: c.Head().RequestID, RetryAfterSeconds: 1, Message: "outcome unknown"}
}

// deadlineWatcher refuses every watch, saying whether its context had a
// deadline.
type deadlineWatcher struct{}

func (deadlineWatcher) Watch(ctx context.Context, _ watch.Spec) (*watch.Sub, error) {
	if _, ok := ctx.Deadline(); ok {
		return nil, errors.New("a watch with a deadline")
	}
	return nil, contract.Errorf(contract.ENotFound, "no deadline")
}

// TestRequestDeadline: with a writer that never answers, a read is
// answered 503 partition_unavailable and a write 503 outcome_unknown
// naming its requestId, both with Retry-After, once Config.RequestTimeout
// passes; a watch gets no deadline.
func TestRequestDeadline(t *testing.T) {
	const timeout = 50 * time.Millisecond
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens, RequestTimeout: timeout, Watch: deadlineWatcher{}}, &hungWriter{},
		fakeLister{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, requestID          string
	}{
		{"ErrReadUnavailable", "GET", "/v1/kv/tenant/a/project/b/k", "", 503, contract.EUnavailable, ""},
		{"ErrWriteOutcomeUnknown", "PUT", "/v1/kv/tenant/a/project/b/k", `{"value":1,"requestId":"r-1"}`, 503, contract.EOutcomeUnknown, "r-1"},
		{"OKWatchWithoutDeadline", "GET", "/v1/watch?prefix=tenant/a/project/b/", "", 404, contract.ENotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			rec := serve(s.Handler(), tc.method, tc.path, tc.body)
			took := time.Since(start)
			d := wantError(t, rec, tc.status, tc.code, "", "")
			if d.RequestID != tc.requestID {
				t.Fatalf("requestId %q; want %q", d.RequestID, tc.requestID)
			}
			if tc.status == http.StatusServiceUnavailable && (rec.Header().Get("Retry-After") != "1" || took < timeout) {
				t.Fatalf("Retry-After %q after %v; want 1 after the deadline", rec.Header().Get("Retry-After"), took)
			}
		})
	}
}
