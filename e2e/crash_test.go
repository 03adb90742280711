package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// procStack is eskv as real processes: the writer and projector binaries
// against an in-process broker and a fresh database.
type procStack struct {
	*stack
	writer, projector *proc.Proc
	projectorAddr     string
}

func mustProcStack(tb testing.TB) *procStack {
	tb.Helper()
	return startProcStack(tb, testenv.MustBroker(tb, partitions))
}

// startProcStack starts writer and projector processes against broker.
func startProcStack(tb testing.TB, broker *testenv.Broker) *procStack {
	tb.Helper()
	s := &stack{tb: tb, broker: broker, pg: testenv.MustPostgresDB(tb)}
	s.store = projection.New(s.pg.Pool)
	httpAddr := freeAddr(tb)
	projAddr := freeAddr(tb)
	for projAddr == httpAddr {
		projAddr = freeAddr(tb)
	}
	common := procEnv(s)
	ps := &procStack{stack: s, projectorAddr: projAddr}
	ps.projector = startProc(tb, "projector", append(common, "ESKV_PROJECTOR_ADDR="+projAddr)...)
	ps.writer = startProc(tb, "writer", append(common, "ESKV_HTTP_ADDR="+httpAddr, "ESKV_DEV_TOKEN="+devToken, "ESKV_WRITER_ID=writer-e2e")...)
	s.url = "http://" + httpAddr
	waitHTTP(tb, s.url+"/readyz", 60*time.Second)
	waitHTTP(tb, "http://"+projAddr+"/readyz", 30*time.Second)
	return ps
}

// assertProjectionIsFoldOfLog waits until the projector consumed the whole
// log, then checks that every key's projected state equals the last event
// of the key in the log, and that kv_history holds each event once.
func assertProjectionIsFoldOfLog(t *testing.T, s *stack) []contract.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	log := s.readLog(ctx)
	waitProjected(t, s)
	last := map[string]contract.Event{}
	for _, e := range log {
		if p, ok := last[e.Key]; ok && e.Version != p.Version+1 {
			same, _ := json.Marshal(p)
			this, _ := json.Marshal(e)
			t.Fatalf("%s: version %d follows %d in the log (identical events: %v)\n%s\n%s", e.Key, e.Version, p.Version, bytes.Equal(same, this), same, this)
		}
		last[e.Key] = e
	}
	for k, e := range last {
		st, err := s.store.State(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version != e.Version || st.Live != e.Live() || (e.Live() && !bytes.Equal(st.Entry.Value, e.After)) {
			t.Fatalf("%s: projected version %d live %v value %s; log says version %d live %v value %s",
				k, st.Version, st.Live, st.Entry.Value, e.Version, e.Live(), e.After)
		}
	}
	var rows int
	if err := s.pg.Pool.QueryRow(ctx, `SELECT count(*) FROM kv_history`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != len(log) {
		t.Fatalf("kv_history has %d rows, the log %d events", rows, len(log))
	}
	return log
}

// TestProjectorKill9: the projector is killed with SIGKILL while events
// stream in, then restarted; the projection equals the fold of the log,
// with no event lost or applied twice.
func TestProjectorKill9(t *testing.T) {
	t.Parallel()
	s := mustProcStack(t)
	var writes atomic.Int64
	stop := runClients(t, 8, func(c, i int) {
		key := fmt.Sprintf("/v1/kv/tenant/t%d/project/p/k%d", c, i%50)
		if r := s.do("PUT", key, devToken, map[string]any{"value": map[string]int{"c": c, "i": i}}); r.Status == 200 {
			writes.Add(1)
		}
	})
	for range 3 {
		testenv.WaitFor(t, 30*time.Second, "writes", func() bool { return writes.Load() > 300 })
		s.projector.Kill()
		writes.Store(0)
		testenv.WaitFor(t, 30*time.Second, "writes while the projector is down", func() bool { return writes.Load() > 300 })
		mustStart(t, s.projector)
	}
	stop()
	log := assertProjectionIsFoldOfLog(t, s.stack)
	assertLogInvariants(t, s.stack, nil)
	t.Logf("%d events survived 3 projector kills", len(log))
}

// ack is an acknowledged write.
type ack struct {
	key     string
	version int64
	value   string
}

// TestWriterKill9: the writer is killed with SIGKILL with requests in
// flight, then restarted. Every acknowledged write is in the log with its
// version and value; the log holds only whole transactions (contiguous
// versions); the projection equals the fold of the log.
func TestWriterKill9(t *testing.T) {
	t.Parallel()
	s := mustProcStack(t)
	var (
		mu       sync.Mutex
		acks     []ack
		failures atomic.Int64
		okCount  atomic.Int64
	)
	rngs := make([]*rand.Rand, 16)
	for c := range rngs {
		rngs[c] = rand.New(rand.NewPCG(uint64(c), 7))
	}
	stop := runClients(t, len(rngs), func(c, i int) {
		key := fmt.Sprintf("tenant/t%d/project/p/k%d", rngs[c].IntN(4), rngs[c].IntN(20))
		a, ok := s.put(key, fmt.Sprintf(`"c%d-%d"`, c, i))
		if !ok {
			failures.Add(1)
			time.Sleep(20 * time.Millisecond) // back off while the writer restarts
			return
		}
		okCount.Add(1)
		mu.Lock()
		acks = append(acks, a)
		mu.Unlock()
	})
	s.killWriterThrice(t, &okCount, 300, "acknowledged writes")
	stop()

	log := assertAcknowledgedInLog(t, s.stack, acks)
	t.Logf("%d acknowledged writes all in a log of %d events; %d requests failed during 3 writer kills", len(acks), len(log), failures.Load())
}

// killWriterThrice kills the writer with SIGKILL and restarts it three
// times, each after acked (what the clients acknowledged) grew by every,
// then waits for 100 more acknowledgements after the last restart.
func (s *procStack) killWriterThrice(t *testing.T, acked *atomic.Int64, every int64, what string) {
	t.Helper()
	for range 3 {
		before := acked.Load()
		testenv.WaitFor(t, 60*time.Second, what, func() bool { return acked.Load() > before+every })
		s.writer.Kill()
		mustStart(t, s.writer)
		waitHTTP(t, s.url+"/readyz", 60*time.Second)
	}
	before := acked.Load()
	testenv.WaitFor(t, 60*time.Second, what+" after the last restart", func() bool { return acked.Load() > before+100 })
}

// put writes value (JSON) to key with a short client timeout and reports
// the acknowledged write, if it was acknowledged.
func (s *stack) put(key, value string) (ack, bool) {
	req, _ := http.NewRequest("PUT", s.url+"/v1/kv/"+key, strings.NewReader(`{"value":`+value+`}`))
	req.Header.Set("Authorization", "Bearer "+devToken)
	resp, err := shortClient.Do(req)
	if err != nil {
		return ack{}, false
	}
	defer resp.Body.Close()
	var e contract.Entry
	if resp.StatusCode != 200 || jsonDecode(resp.Body, &e) != nil {
		return ack{}, false
	}
	return ack{key, e.Version, string(e.Value)}, true
}

var shortClient = &http.Client{Timeout: 5 * time.Second}

// assertAcknowledgedInLog checks that the projection is the fold of the log
// and that every acknowledged write is in the log with its value.
func assertAcknowledgedInLog(t *testing.T, s *stack, acks []ack) []contract.Event {
	t.Helper()
	log := assertProjectionIsFoldOfLog(t, s)
	assertLogInvariants(t, s, acks)
	inLog := map[string]string{}
	for _, e := range log {
		inLog[fmt.Sprintf("%s@%d", e.Key, e.Version)] = string(e.After)
	}
	for _, a := range acks {
		v, ok := inLog[fmt.Sprintf("%s@%d", a.key, a.version)]
		if !ok || v != a.value {
			t.Fatalf("acknowledged write %s@%d = %s is not in the log (log has %q)", a.key, a.version, a.value, v)
		}
	}
	return log
}
