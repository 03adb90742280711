// Package stack runs eskv in the test's process — a kfake broker, a fresh
// Postgres database, writer, projector and the HTTP API on httptest — for
// tests of clients of the API (the Go client, kvctl).
package stack

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/writer"
)

// Tokens of the stack: DevToken may read and write tenant/; ReaderToken
// may only read tenant/acme/.
const (
	DevToken    = "dev-token-0123456789abcdef"
	ReaderToken = "reader-token-0123456789abcdef"
)

// MustStart runs the stack until the test ends and returns the API's URL
// once the writer is ready.
func MustStart(tb testing.TB) string {
	tb.Helper()
	broker := testenv.MustBroker(tb, 2)
	store := projection.New(testenv.MustPostgres(tb))
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	w, err := writer.New(writer.Config{Brokers: broker.Addrs, Topics: broker.Topics, SessionTimeout: 6 * time.Second},
		store, log, prometheus.NewRegistry())
	if err != nil {
		tb.Fatal(err)
	}
	p, err := projector.New(projector.Config{Brokers: broker.Addrs, Topic: broker.Topics.Changes, Partitions: broker.Topics.Partitions},
		store, log, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for name, run := range map[string]func(context.Context) error{"writer": w.Run, "projector": p.Run} {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				tb.Errorf("%s: %v", name, err)
			}
		})
	}
	tokens, err := api.NewTokens([]api.TokenConfig{
		api.DevToken(DevToken),
		{Token: ReaderToken, Principal: "acme-reader", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read}}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := api.New(api.Config{Tokens: tokens}, w, store, log)
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	tb.Cleanup(func() {
		hs.Close()
		cancel()
		wg.Wait()
	})
	WaitFor(tb, "writer ready", w.Ready)
	return hs.URL
}

// WaitFor polls cond until it holds, failing the test after 30 seconds.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
