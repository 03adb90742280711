package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/tools/linz"
)

// History reads: one CAS-client step in -history-every reads the history
// of a random register key (client.History, GET /v1/kv/{key}:history)
// through a random writer instead of a read and a write, either from
// version 1 (one read in four) or from a version up to 50 below the
// highest version acknowledged so far, so that most reads are one short
// page. Each read that answered is recorded with its call and return
// times and the versions and values it returned. The check: the versions
// are contiguous and in order from the requested one, each is the log's
// (same value), and every write acknowledged before the read was called,
// at or above the requested version, is among them with its value — the
// read path's rule, "every read sees every write acknowledged before it
// began", for history.

// historyFull is one history read in historyFull that reads from version
// 1; historyBack bounds how far below the highest acknowledged version
// the others start.
const (
	historyFull = 4
	historyBack = 50
)

// historyEntry is one version a history read returned.
type historyEntry struct {
	Version int64           `json:"version"`
	Value   json.RawMessage `json:"value,omitempty"`
}

// historyRead is a history read that answered: 200, or 404 (the key had
// no version).
type historyRead struct {
	Client, Writer int
	Key            string
	From           int64
	Call, Return   int64 // ns since the start, the clients' clock
	NotFound       bool
	Versions       []historyEntry
}

// historyReads makes and records the history reads of the CAS clients.
type historyReads struct {
	every   int
	clients []*client.Client // one per writer
	timeout time.Duration

	mu     sync.Mutex
	latest map[string]int64 // the highest version acknowledged per key
	reads  []historyRead
	failed map[string]int // reads not answered, by error code
	// example is the first error of each code in failed, for the report.
	example map[string]string
}

func newHistoryReads(urls []string, token string, every int, timeout time.Duration) *historyReads {
	h := &historyReads{every: every, timeout: timeout, latest: map[string]int64{}, failed: map[string]int{}, example: map[string]string{}}
	for _, u := range urls {
		// One try per call: a retry would blur the call's interval.
		h.clients = append(h.clients, client.New(u, token, client.WithRetries(1, 50*time.Millisecond, 500*time.Millisecond)))
	}
	return h
}

// due reports whether this CAS-client step is a history read.
func (h *historyReads) due(rng *rand.Rand) bool {
	return h != nil && h.every > 0 && rng.IntN(h.every) == 0
}

// observe notes the version of an acknowledged write.
func (h *historyReads) observe(o linz.Op) {
	if h == nil || !o.In.Kind.Writes() || o.Out.Outcome != linz.OK {
		return
	}
	h.mu.Lock()
	h.latest[o.In.Key] = max(h.latest[o.In.Key], o.Out.Version)
	h.mu.Unlock()
}

// read reads key's history through writer w for client id and records
// it; now is the clients' clock. It reports whether it answered.
func (h *historyReads) read(id, w int, rng *rand.Rand, key string, now func() int64) bool {
	h.mu.Lock()
	from := max(1, h.latest[key]-rng.Int64N(historyBack+1))
	h.mu.Unlock()
	if rng.IntN(historyFull) == 0 {
		from = 1
	}
	// A read from version 1 may take a few pages of 1000.
	ctx, cancel := context.WithTimeout(context.Background(), 3*h.timeout)
	defer cancel()
	r := historyRead{Client: id, Writer: w, Key: key, From: from, Call: now()}
	var err error
	for v, e := range h.clients[w].History(ctx, key, client.HistoryOptions{FromVersion: from, Limit: 1000}) {
		if e != nil {
			err = e
			break
		}
		r.Versions = append(r.Versions, historyEntry{Version: v.Version, Value: v.Value})
	}
	r.Return = now()
	h.mu.Lock()
	defer h.mu.Unlock()
	switch code := contract.ErrorCode(err); {
	case err == nil:
	case code == contract.ENotFound:
		r.NotFound, r.Versions = true, nil
	default:
		if ne := (*client.NetworkError)(nil); code == "" || errors.As(err, &ne) {
			code = "no answer" // a broken connection: a writer killed or paused
		}
		h.failed[code]++
		if _, ok := h.example[code]; !ok {
			h.example[code] = err.Error()
		}
		return false
	}
	h.reads = append(h.reads, r)
	return true
}

// snapshot returns the answered reads, the failures by code and an
// example of each.
func (h *historyReads) snapshot() ([]historyRead, map[string]int, map[string]string) {
	if h == nil {
		return nil, nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]historyRead(nil), h.reads...), maps.Clone(h.failed), maps.Clone(h.example)
}

// historyFindings is what the check of the history reads found.
type historyFindings struct {
	reads, full, notFound int
	versions              int
	judged                int // (read, acknowledged write) pairs checked
	failed                map[string]int
	example               map[string]string // an error of each code in failed
	violations            []string
	elapsed               time.Duration
}

// ackedWrite is an acknowledged write of a register key: its version,
// value and when it was answered.
type ackedWrite struct {
	version int64
	value   json.RawMessage
	ret     int64
}

// checkHistory checks the history reads against the CAS writes of ops and
// the log evs (every committed record, read after the clients stopped).
func checkHistory(reads []historyRead, ops []linz.Op, evs []logcheck.Event) historyFindings {
	t0 := time.Now()
	f := historyFindings{reads: len(reads)}
	acked := map[string][]ackedWrite{}
	for _, o := range ops {
		if o.In.Kind.Writes() && o.Out.Outcome == linz.OK {
			acked[o.In.Key] = append(acked[o.In.Key], ackedWrite{o.Out.Version, mustJSON(o.Written()), o.Return})
		}
	}
	inLog := map[keyVersion]json.RawMessage{}
	for _, e := range evs {
		if _, ok := acked[e.Event.Key]; ok {
			inLog[keyVersion{e.Event.Key, e.Event.Version}] = projection.HistoryVersionOf(&e.Event).Value
		}
	}
	for _, r := range reads {
		f.versions += len(r.Versions)
		if r.From <= 1 {
			f.full++
		}
		if r.NotFound {
			f.notFound++
		}
		f.violations = append(f.violations, checkHistoryRead(r, inLog)...)
		f.violations = append(f.violations, f.checkAcked(r, acked[r.Key])...)
	}
	f.elapsed = time.Since(t0)
	return f
}

// checkHistoryRead checks that r's versions are contiguous and in order
// from the version it asked for, each the log's with the log's value.
func checkHistoryRead(r historyRead, inLog map[keyVersion]json.RawMessage) []string {
	var out []string
	want := max(r.From, 1)
	for _, v := range r.Versions {
		if v.Version != want {
			out = append(out, fmt.Sprintf("history of %s from v%d via writer-%d at %s: v%d where v%d was due (not contiguous or out of order)",
				r.Key, r.From, r.Writer+1, at(r), v.Version, want))
		}
		want = v.Version + 1
		logged, ok := inLog[keyVersion{r.Key, v.Version}]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("history of %s via writer-%d at %s: v%d is not in the log", r.Key, r.Writer+1, at(r), v.Version))
		case !sameJSON(logged, v.Value):
			out = append(out, fmt.Sprintf("history of %s via writer-%d at %s: v%d has another value than the log's", r.Key, r.Writer+1, at(r), v.Version))
		}
	}
	return out
}

// checkAcked checks that every write of r's key acknowledged before r
// was called, at or above the version r asked for, is in r with its
// value.
func (f *historyFindings) checkAcked(r historyRead, acked []ackedWrite) []string {
	got := make(map[int64]json.RawMessage, len(r.Versions))
	for _, v := range r.Versions {
		got[v.Version] = v.Value
	}
	var out []string
	for _, a := range acked {
		if a.ret >= r.Call || a.version < r.From {
			continue
		}
		f.judged++
		switch v, ok := got[a.version]; {
		case !ok:
			out = append(out, fmt.Sprintf("history of %s from v%d via writer-%d at %s misses v%d, acknowledged at %s", r.Key, r.From, r.Writer+1, at(r), a.version, time.Duration(a.ret)))
		case !sameJSON(v, a.value):
			out = append(out, fmt.Sprintf("history of %s via writer-%d at %s: v%d is %s, acknowledged as %s", r.Key, r.Writer+1, at(r), a.version, v, a.value))
		}
	}
	return out
}

// at is a read's interval on the clients' clock.
func at(r historyRead) string {
	return fmt.Sprintf("%s-%s", time.Duration(r.Call).Round(time.Millisecond), time.Duration(r.Return).Round(time.Millisecond))
}

// sameJSON reports whether a and b are the same JSON value (absent and
// null alike).
func sameJSON(a, b json.RawMessage) bool {
	var x, y any
	if len(a) > 0 && json.Unmarshal(a, &x) != nil {
		return false
	}
	if len(b) > 0 && json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func (f *historyFindings) print(w io.Writer) {
	n, by := countBy(f.failed)
	fmt.Fprintf(w, "history: %d violations (%d history reads checked, %d from version 1, %d not found, %d versions returned; "+
		"%d (read, acknowledged write) judgements; %d not answered (%s); %s)\n",
		len(f.violations), f.reads, f.full, f.notFound, f.versions, f.judged, n, by, f.elapsed.Round(time.Millisecond))
	printFirst(w, f.violations)
	for _, code := range slices.Sorted(maps.Keys(f.example)) {
		fmt.Fprintf(w, "  not answered, %s: %s\n", code, f.example[code])
	}
}
