// Package e2e tests eskv end to end: in one process (a kfake broker, a
// fresh Postgres database, the writer with its HTTP API and the
// projector: testenv/stack) and as processes.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/schemas"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
)

const (
	devToken   = inproc.DevToken
	acmeToken  = inproc.AcmeToken
	readerTok  = inproc.ReaderToken
	partitions = 4
)

// stack is eskv under test as the tests reach it: in one process
// (mustStack) or as processes (mustProcStack).
type stack struct {
	tb     testing.TB
	broker *testenv.Broker
	pg     *testenv.Postgres
	store  *projection.Store
	url    string
	// kafka is how the test's own clients reach broker (zero: plaintext).
	kafka kafkaconf.Conn
}

// mustStack runs eskv in the test's process (writer, projector, HTTP API)
// on topics of 4 partitions until the test ends.
func mustStack(tb testing.TB, opts ...inproc.Option) *stack {
	tb.Helper()
	st := inproc.MustRun(tb, append([]inproc.Option{inproc.Partitions(partitions)}, opts...)...)
	return &stack{tb: tb, broker: st.Broker, pg: st.Postgres, store: st.Store, url: st.URL}
}

// waitProjected waits until the projection's stored offsets are past the
// last committed event of every partition (each validated against the
// event JSON Schema).
func waitProjected(tb testing.TB, s *stack) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, ends := s.readLogEnds(ctx)
	testenv.WaitProjected(tb, 60*time.Second, s.store, s.broker.Topics.Changes, ends)
}

// response is an HTTP answer, decoded.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) entry(tb testing.TB) contract.Entry {
	tb.Helper()
	var e contract.Entry
	if err := json.Unmarshal(r.Body, &e); err != nil {
		tb.Fatalf("decode entry %s: %v", r.Body, err)
	}
	return e
}

func (r response) errorBody(tb testing.TB) contract.ErrorDetail {
	tb.Helper()
	var e contract.ErrorBody
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

// readLog returns every committed event in kv.changes (from each
// partition's log start: compaction may have moved it), in log order per
// partition, each validated against the event JSON Schema.
func (s *stack) readLog(ctx context.Context) []contract.Event {
	evs, _ := s.readLogEnds(ctx)
	return evs
}

// readLogEnds also returns, per partition, the offset after its last
// committed event: a projection holding every event has stored at least
// that.
func (s *stack) readLogEnds(ctx context.Context) ([]contract.Event, map[int32]int64) {
	s.tb.Helper()
	cl, err := s.kafka.NewClient("e2e", s.broker.Addrs)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer cl.Close()
	var out []contract.Event
	ends := map[int32]int64{}
	starts := testenv.StartOffsets(ctx, s.tb, cl, s.broker.Topics.Changes)
	for p, end := range s.endOffsets(ctx) {
		err := changelog.ReadCommitted(ctx, cl, changelog.Range{Topic: s.broker.Topics.Changes, Partition: p, From: starts[p], End: end}, func(r *kgo.Record) error {
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
	cl, err := s.kafka.NewClient("e2e", s.broker.Addrs)
	if err != nil {
		s.tb.Fatal(err)
	}
	defer cl.Close()
	return testenv.EndOffsets(ctx, s.tb, cl, s.broker.Topics.Changes)
}

func jsonDecode(r io.Reader, v any) error { return json.NewDecoder(r).Decode(v) }

// runClients runs n clients, client c calling step(c, i) for i = 0, 1, ...
// until stop is called; stop waits for them to return. The test's cleanup
// stops them too, before the stack stops.
func runClients(tb testing.TB, n int, step func(c, i int)) (stop func()) {
	tb.Helper()
	done := make(chan struct{})
	var wg sync.WaitGroup
	for c := range n {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				step(c, i)
			}
		})
	}
	var once sync.Once
	stop = func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
	tb.Cleanup(stop)
	return stop
}
