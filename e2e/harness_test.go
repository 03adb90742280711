// Package e2e tests eskv end to end in one process: a kfake broker, a
// fresh Postgres database, the writer with its HTTP API and the projector.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/schemas"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/writer"
)

const (
	devToken   = "dev-token-0123456789abcdef"
	acmeToken  = "acme-token-0123456789abcdef"
	readerTok  = "reader-token-0123456789abcdef"
	partitions = 4
)

// stack is a running eskv in one process.
type stack struct {
	tb     testing.TB
	broker *testenv.Broker
	pg     *testenv.Postgres
	store  *projection.Store
	writer *writer.Writer
	url    string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// projectorMayStop is a mustStack option for tests in which the projector
// is expected to stop with an error (a reset topic).
const projectorMayStop = true

func mustStack(tb testing.TB, withProjector bool, opts ...bool) *stack {
	tb.Helper()
	s := &stack{tb: tb, broker: testenv.MustBroker(tb, partitions), pg: testenv.MustPostgresDB(tb)}
	s.store = projection.New(s.pg.Pool)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if testing.Verbose() && os.Getenv("ESKV_TEST_LOGS") != "" {
		log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	reg := prometheus.NewRegistry()
	w, err := writer.New(writer.Config{
		Brokers:        s.broker.Addrs,
		Topics:         s.broker.Topics,
		SessionTimeout: 6 * time.Second,
	}, s.store, log, reg)
	if err != nil {
		tb.Fatal(err)
	}
	s.writer = w
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := w.Run(ctx); err != nil {
			tb.Errorf("writer: %v", err)
		}
	}()
	if withProjector {
		startProjector(tb, ctx, s, log, &s.wg, len(opts) > 0 && opts[0] == projectorMayStop)
	}
	tokens, err := api.NewTokens([]api.TokenConfig{
		api.DevToken(devToken),
		{Token: acmeToken, Principal: "acme-svc", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read, api.Write}}}},
		{Token: readerTok, Principal: "acme-reader", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read}}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := api.New(api.Config{Tokens: tokens, Gatherer: reg, Registerer: reg}, w, s.store, log)
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	s.url = hs.URL
	tb.Cleanup(func() {
		hs.Close()
		cancel()
		s.wg.Wait()
	})
	waitFor(tb, 30*time.Second, "writer ready", w.Ready)
	return s
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// response is an HTTP answer, decoded.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) entry(tb testing.TB) events.Entry {
	tb.Helper()
	var e events.Entry
	if err := json.Unmarshal(r.Body, &e); err != nil {
		tb.Fatalf("decode entry %s: %v", r.Body, err)
	}
	return e
}

func (r response) errorBody(tb testing.TB) api.ErrorDetail {
	tb.Helper()
	var e api.ErrorBody
	if err := json.Unmarshal(r.Body, &e); err != nil {
		tb.Fatalf("decode error %s: %v", r.Body, err)
	}
	return e.Error
}

var httpClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 128}}

func (s *stack) do(method, path, token string, body any) response {
	s.tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewBufferString(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.tb.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		s.tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.tb.Fatal(err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// readLog returns every committed event in kv.changes, in log order per
// partition, each validated against the event JSON Schema.
func (s *stack) readLog(ctx context.Context) []events.Event {
	evs, _ := s.readLogEnds(ctx)
	return evs
}

// readLogEnds also returns, per partition, the offset after its last
// committed event: a projection holding every event has stored at least
// that.
func (s *stack) readLogEnds(ctx context.Context) ([]events.Event, map[int32]int64) {
	s.tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker.Addrs...))
	if err != nil {
		s.tb.Fatal(err)
	}
	defer cl.Close()
	var out []events.Event
	ends := map[int32]int64{}
	for p, end := range s.endOffsets(ctx) {
		err := changelog.ReadCommitted(ctx, cl, s.broker.Topics.Changes, p, 0, end, func(r *kgo.Record) error {
			if err := schemas.ValidateChange(r.Value); err != nil {
				return fmt.Errorf("event at %d/%d breaks the schema: %w\n%s", r.Partition, r.Offset, err, r.Value)
			}
			e, err := changelog.Event(r)
			if err != nil {
				return err
			}
			out = append(out, e)
			ends[p] = r.Offset + 1
			return nil
		})
		if err != nil {
			s.tb.Fatalf("reading partition %d of the log: %v", p, err)
		}
	}
	return out, ends
}

func (s *stack) endOffsets(ctx context.Context) map[int32]int64 {
	s.tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.broker.Addrs...))
	if err != nil {
		s.tb.Fatal(err)
	}
	defer cl.Close()
	return testenv.EndOffsets(ctx, s.tb, cl, s.broker.Topics.Changes)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }
