package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/tools/linz"
)

// registerKeys returns n keys, each in its own project so that they spread
// over partitions: distinct partitions while there are enough.
func registerKeys(n int, partitions int32) []string {
	var keys []string
	used := map[int32]bool{}
	for i := 0; len(keys) < n; i++ {
		scope := fmt.Sprintf("tenant/chaos/project/p%d", i)
		p := changelog.Partition(scope, partitions)
		if used[p] && len(used) < int(partitions) && i < 100*n {
			continue
		}
		used[p] = true
		keys = append(keys, scope+"/reg")
	}
	return keys
}

// clients run CAS-register operations against random writers and record
// every operation.
type clients struct {
	urls    []string
	token   string
	keys    []string
	timeout time.Duration
	http    *http.Client
	t0      time.Time

	mu  sync.Mutex
	ops []linz.Op
	// The listing workload (listStep): unconditional puts and deletes of
	// listKeys keys beside each register key, and the listings of their
	// projects; failedLists counts listings not answered 200.
	changes     []linz.Change
	lists       []linz.Listing
	failedLists int

	// hist makes one step in hist.every a history read (history.go); nil:
	// none. Set before run.
	hist *historyReads

	// declared is the version of each project's field-index declaration
	// (declareScans) acknowledged last; redeclare changes them between.
	declared map[string]int64
}

// listKeys is how many keys the listing workload writes in each register
// key's project (<scope>/l/<n>), beside the register key that the
// listings also see.
const listKeys = 3

func newClients(urls []string, token string, keys []string, timeout time.Duration, t0 time.Time) *clients {
	return &clients{
		urls: urls, token: token, keys: keys, timeout: timeout, t0: t0,
		http: &http.Client{Transport: &http.Transport{
			MaxIdleConns:        256,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		}},
	}
}

// run starts n clients and returns once stop is closed and every client
// finished its current operation.
func (c *clients) run(n int, seed uint64, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for id := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.client(id, rand.New(rand.NewPCG(seed, uint64(id))), stop)
		}()
	}
	wg.Wait()
}

// client reads a random key through a random writer, then writes it through
// another random writer with the version it read as the expected version
// and a value no other operation writes (or, one time in touchEvery when
// the key exists, touches it at that version).
func (c *clients) client(id int, rng *rand.Rand, stop <-chan struct{}) {
	for seq := 0; ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		if rng.IntN(4) == 0 {
			c.listStep(id, rng, seq, stop)
			continue
		}
		if c.hist.due(rng) {
			if !c.hist.read(id, rng.IntN(len(c.urls)), rng, c.keys[rng.IntN(len(c.keys))], c.now) {
				pause(stop, 20*time.Millisecond+time.Duration(rng.IntN(30))*time.Millisecond)
			}
			continue
		}
		key := c.keys[rng.IntN(len(c.keys))]
		r := c.read(id, rng.IntN(len(c.urls)), key)
		var expected int64
		switch r.Out.Outcome {
		case linz.OK:
			expected = r.Out.Version
		case linz.NotFound:
		default:
			pause(stop, 20*time.Millisecond+time.Duration(rng.IntN(30))*time.Millisecond)
			continue
		}
		var w linz.Op
		if expected > 0 && rng.IntN(touchEvery) == 0 {
			w = c.touch(id, rng.IntN(len(c.urls)), key, expected, fmt.Sprintf("c%d-%d", id, seq), rng.IntN(2) == 0)
		} else {
			w = c.write(id, rng.IntN(len(c.urls)), key, expected, fmt.Sprintf("c%d-%d", id, seq))
		}
		if w.Out.Outcome == linz.Failed || w.Out.Outcome == linz.Unknown {
			pause(stop, 20*time.Millisecond+time.Duration(rng.IntN(30))*time.Millisecond)
		}
	}
}

// listStep is one operation of the listing workload, through a random
// writer, in the project of a random register key: an unconditional put
// (4 in 10) or delete (3 in 10) of one of its listKeys keys, with a value
// no other operation writes, a listing of the project (1 in 10), or a
// filtered scan of its listKeys keys (2 in 10) for the value true of a
// field every one of their values holds, true or false at random:
// "indexed", which the project declares (declareScans: its index
// answers), or "scanned", which it does not (the values are read). The
// listings and scans are checked against the puts and deletes, and
// against the register's CAS writes, by linz.CheckListings: a scan lists
// the keys whose latest put holds true, so an index row left from an
// older value shows.
func (c *clients) listStep(id int, rng *rand.Rand, seq int, stop <-chan struct{}) {
	scope := contract.ScopeOf(c.keys[rng.IntN(len(c.keys))])
	w := rng.IntN(len(c.urls))
	key := fmt.Sprintf("%s/l/%d", scope, rng.IntN(listKeys))
	var ch linz.Change
	switch n := rng.IntN(10); {
	case n < 4:
		ch = c.change(id, w, key, false, fmt.Sprintf("c%d-%d", id, seq), rng.IntN(2) == 0)
	case n < 7:
		ch = c.change(id, w, key, true, fmt.Sprintf("c%d-%d", id, seq), false)
	case n == 7:
		c.list(id, w, scope+"/", "")
		return
	case n == 8:
		c.list(id, w, scope+"/l/", scanIndexed)
		return
	default:
		c.list(id, w, scope+"/l/", scanScanned)
		return
	}
	if ch.Outcome == linz.Failed || ch.Outcome == linz.Unknown {
		pause(stop, 20*time.Millisecond+time.Duration(rng.IntN(30))*time.Millisecond)
	}
}

// The filters of the listing workload's scans.
const (
	scanIndexed = "&field=indexed&op=eq&value=true"
	scanScanned = "&field=scanned&op=eq&value=true"
)

// change puts value to key, its fields indexed and scanned set to match
// (so that the scans list it), or deletes key, unconditionally, and
// records the outcome.
func (c *clients) change(id, w int, key string, del bool, value string, match bool) linz.Change {
	rid := "chaos-" + value
	ch := linz.Change{Client: id, Writer: w, Key: key, Delete: del, RequestID: rid}
	if match {
		ch.Matches = []string{scanIndexed, scanScanned}
	}
	method, url, body := http.MethodPut, c.urls[w]+"/v1/kv/"+key, []byte(nil)
	if del {
		method, url = http.MethodDelete, url+"?requestId="+rid
	} else {
		v, _ := json.Marshal(map[string]any{"v": value, "indexed": match, "scanned": match})
		body, _ = json.Marshal(contract.PutBody{Value: v, RequestID: rid})
	}
	ch, _ = c.sendChange(ch, method, url, body)
	return ch
}

// sendChange sends the put or delete ch, records its call, return and
// outcome in it and among the changes, and returns it and the answer.
func (c *clients) sendChange(ch linz.Change, method, url string, body []byte) (linz.Change, answer) {
	ch.Call = c.now()
	a := c.do(method, url, body)
	ch.Return = c.now()
	ch.Outcome, ch.Version, ch.Detail = classifyChange(a)
	c.mu.Lock()
	c.changes = append(c.changes, ch)
	c.mu.Unlock()
	return ch, a
}

// classifyChange turns the answer to an unconditional put or delete into
// its outcome and the version it wrote: 200 is OK, a delete's 404 (the
// key did not exist) had no effect, and the rest is classified as a CAS
// write's answer is (classifyWrite).
func classifyChange(a answer) (linz.Outcome, int64, string) {
	switch {
	case a.err == nil && a.status == http.StatusOK:
		var v struct {
			Version int64 `json:"version"`
		}
		if err := json.Unmarshal(a.body, &v); err != nil || v.Version < 1 {
			return linz.Unknown, 0, "undecodable answer: " + string(a.body)
		}
		return linz.OK, v.Version, ""
	case a.err == nil && a.status == http.StatusNotFound && errorCode(a.body) == contract.ENotFound:
		return linz.Failed, 0, "not found"
	}
	o, detail := classifyWrite(a, "")
	return o.Outcome, 0, detail
}

// list lists prefix through writer w, with the filter of the query
// filter (""; none), and records the page when it was answered 200 (a
// listing has no effect: any other answer is only counted).
func (c *clients) list(id, w int, prefix, filter string) {
	l := linz.Listing{Client: id, Writer: w, Prefix: prefix, Filter: filter, Call: c.now()}
	a := c.do(http.MethodGet, c.urls[w]+"/v1/kv?limit=1000&prefix="+prefix+filter, nil)
	l.Return = c.now()
	var page contract.ListAnswer
	ok := a.err == nil && a.status == http.StatusOK && json.Unmarshal(a.body, &page) == nil && !page.Truncated
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		c.failedLists++
		return
	}
	l.Items = make(map[string]int64, len(page.Items))
	for _, e := range page.Items {
		l.Items[e.Key] = e.Version
	}
	c.lists = append(c.lists, l)
}

// declareScans declares the field "indexed" in the project of every
// register key (the reserved key <scope>/.eskv/field-indexes), so that
// the listing workload's scans on it go through its index once it is
// built, and those on "scanned" through the values. It tries each
// writer in turn until one takes it, and records the version each
// declaration was acknowledged at (indexStatusSettled's). round tells
// its requestIds apart from an earlier call's.
func (c *clients) declareScans(ctx context.Context, round string) error {
	for _, scope := range c.scopes() {
		rid := "chaos-declare-" + round + "-" + scope
		var a answer
		for try := 0; try < 50 && ctx.Err() == nil; try++ {
			if a = c.declare(try%len(c.urls), scope, `{"fields":["indexed"]}`, rid); a.err == nil && a.status == http.StatusOK {
				break
			}
			pause(ctx.Done(), 200*time.Millisecond)
		}
		if a.err != nil || a.status != http.StatusOK {
			return fmt.Errorf("declaring the field indexes of %s: %d %s %v", scope, a.status, a.body, a.err)
		}
		var e contract.Entry
		if err := json.Unmarshal(a.body, &e); err != nil {
			return fmt.Errorf("declaring the field indexes of %s: %w", scope, err)
		}
		c.mu.Lock()
		if c.declared == nil {
			c.declared = map[string]int64{}
		}
		c.declared[scope] = e.Version
		c.mu.Unlock()
	}
	return nil
}

// scopes returns the projects of the register keys, sorted.
func (c *clients) scopes() []string {
	var out []string
	for _, k := range c.keys {
		out = append(out, contract.ScopeOf(k))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// declare puts value as scope's field-index declaration through writer w,
// once, and records it as the listing workload's puts are (it is a key
// of the project, which the listings may see).
func (c *clients) declare(w int, scope, value, rid string) answer {
	body, _ := json.Marshal(contract.PutBody{Value: json.RawMessage(value), RequestID: rid})
	key := contract.FieldIndexesKey(scope)
	_, a := c.sendChange(linz.Change{Client: -1, Writer: w, Key: key, RequestID: rid}, http.MethodPut, c.urls[w]+"/v1/kv/"+key, body)
	return a
}

// redeclareEvery is how often the fault phase drops a project's field
// "indexed" and declares it again (redeclare).
const redeclareEvery = 3 * time.Second

// redeclare, until stop, drops the field "indexed" from one project's
// declaration every redeclareEvery (declaring "other" instead) and
// declares it again at once, through random writers: the field's index
// is then built again from the project's keys (projection.Store.Backfill)
// while the listing workload writes and scans them, and the scans read
// the values until it is ready. Its puts are recorded for the listings
// and not retried: the fault phase's end declares "indexed" everywhere
// again (declareScans) before indexStatusSettled.
func (c *clients) redeclare(rng *rand.Rand, stop <-chan struct{}) {
	scopes := c.scopes()
	for i := 0; ; i++ {
		pause(stop, redeclareEvery)
		select {
		case <-stop:
			return
		default:
		}
		scope := scopes[i%len(scopes)]
		c.declare(rng.IntN(len(c.urls)), scope, `{"fields":["other"]}`, fmt.Sprintf("chaos-redeclare-%d-drop", i))
		c.declare(rng.IntN(len(c.urls)), scope, `{"fields":["indexed"]}`, fmt.Sprintf("chaos-redeclare-%d-add", i))
	}
}

// indexStatusSettled checks, once the stack healed, that every writer
// answers each project's :indexStatus with the version its declaration
// was acknowledged at (a linearizable read of it, whichever writer owns
// or forwards) and its field "indexed", and that the field's index
// becomes ready within timeout (the backfill of the keys written before
// the declaration finished, faults and restarts of the projector
// included). It returns how many answers it checked.
func (c *clients) indexStatusSettled(ctx context.Context, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	checked := 0
	for scope, version := range c.declared {
		for _, u := range c.urls {
			for {
				a := c.do(http.MethodGet, u+"/v1/kv/"+contract.FieldIndexesKey(scope)+":"+contract.OpFieldIndexStatus.Verb(), nil)
				var st contract.FieldIndexStatusAnswer
				if a.err == nil && a.status == http.StatusOK {
					if err := json.Unmarshal(a.body, &st); err != nil {
						return checked, fmt.Errorf("index status of %s from %s: %w: %s", scope, u, err, a.body)
					}
					if st.Version != version || len(st.Fields) != 1 || st.Fields[0].Field != "indexed" {
						return checked, fmt.Errorf("index status of %s from %s: %s, want version %d and the field indexed", scope, u, a.body, version)
					}
					checked++
					if st.Fields[0].State == contract.FieldIndexReady {
						break
					}
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return checked, fmt.Errorf("index status of %s from %s: %d %s %v, not ready %s after the stack healed", scope, u, a.status, a.body, a.err, timeout)
				}
				pause(ctx.Done(), 200*time.Millisecond)
			}
		}
	}
	return checked, nil
}

// listings returns the listing workload's changes and answered listings,
// and how many listings were not answered.
func (c *clients) listings() ([]linz.Change, []linz.Listing, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.changes), slices.Clone(c.lists), c.failedLists
}

func pause(stop <-chan struct{}, d time.Duration) {
	select {
	case <-stop:
	case <-time.After(d):
	}
}

func (c *clients) now() int64 { return int64(time.Since(c.t0)) }

func (c *clients) record(o linz.Op) linz.Op {
	c.mu.Lock()
	c.ops = append(c.ops, o)
	c.mu.Unlock()
	c.hist.observe(o)
	return o
}

// history returns the operations recorded so far.
func (c *clients) history() []linz.Op {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]linz.Op(nil), c.ops...)
}

// answer is a decoded HTTP answer.
type answer struct {
	status int
	body   []byte
	err    error // transport error (status 0)
	sent   bool  // the request may have reached the server
}

func (c *clients) do(method, url string, body []byte) answer {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return answer{err: err, sent: !dialError(err)}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{err: err, sent: true}
	}
	return answer{status: resp.StatusCode, body: b, sent: true}
}

// dialError reports that the connection could not be made, so the request
// never left the client.
func dialError(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "dial"
}

func (c *clients) read(id, w int, key string) linz.Op {
	o := linz.Op{Client: id, Writer: w, In: linz.Input{Key: key, Kind: linz.Read}, Call: c.now()}
	a := c.do(http.MethodGet, c.urls[w]+"/v1/kv/"+key, nil)
	o.Return = c.now()
	switch {
	case a.err != nil:
		o.Out.Outcome, o.Detail = linz.Failed, a.err.Error()
	case a.status == http.StatusOK:
		var e contract.Entry
		var v string
		if err := json.Unmarshal(a.body, &e); err != nil || json.Unmarshal(e.Value, &v) != nil || e.Key != key {
			o.Out.Outcome, o.Detail = linz.Failed, "undecodable entry: "+string(a.body)
			break
		}
		o.Out = linz.Output{Outcome: linz.OK, Version: e.Version, Value: v}
	case a.status == http.StatusNotFound && errorCode(a.body) == contract.ENotFound:
		o.Out.Outcome = linz.NotFound
	default:
		// A read has no effect: whatever went wrong, it is left out.
		o.Out.Outcome, o.Detail = linz.Failed, fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body))
	}
	return c.record(o)
}

func (c *clients) write(id, w int, key string, expected int64, value string) linz.Op {
	rid := fmt.Sprintf("chaos-%s", value)
	o := linz.Op{Client: id, Writer: w, In: linz.Input{Key: key, Kind: linz.Write, Expected: expected, Value: value}, RequestID: rid}
	body, _ := json.Marshal(contract.PutBody{Value: mustJSON(value), ExpectedVersion: &expected, RequestID: rid})
	o.Call = c.now()
	a := c.do(http.MethodPut, c.urls[w]+"/v1/kv/"+key, body)
	o.Return = c.now()
	o.Out, o.Detail = classifyWrite(a, value)
	return c.record(o)
}

// touchEvery makes one CAS-client write in touchEvery of a key read
// present a touch of it at the version read instead.
const touchEvery = 5

// touch gives key a new expiry (an hour: no register key expires during
// a run) or none (persist) at version expected, through writer w, with a
// requestId unique to it (tag), and records the outcome: ok with the
// version it wrote and the value it kept, or a conflict, as a CAS
// write's (classifyWrite).
func (c *clients) touch(id, w int, key string, expected int64, tag string, persist bool) linz.Op {
	rid := "chaos-touch-" + tag
	o := linz.Op{Client: id, Writer: w, In: linz.Input{Key: key, Kind: linz.Touch, Expected: expected}, RequestID: rid}
	b := contract.TouchBody{Persist: persist, ExpectedVersion: &expected, RequestID: rid}
	if !persist {
		hour := int64(3600)
		b.TTLSeconds = &hour
	}
	body, _ := json.Marshal(b)
	o.Call = c.now()
	a := c.do(http.MethodPost, c.urls[w]+"/v1/kv/"+key+":touch", body)
	o.Return = c.now()
	o.Out, o.Detail = classifyWrite(a, "")
	return c.record(o)
}

// classifyWrite turns the answer to a CAS write into its outcome. Only
// what the writer's code guarantees had no effect is failed; anything else
// that is not a decided answer is unknown.
func classifyWrite(a answer, value string) (linz.Output, string) {
	if a.err != nil {
		if !a.sent {
			return linz.Output{Outcome: linz.Failed}, a.err.Error()
		}
		return linz.Output{Outcome: linz.Unknown}, a.err.Error()
	}
	detail := fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body))
	switch a.status {
	case http.StatusOK:
		var e contract.Entry
		var v string
		if err := json.Unmarshal(a.body, &e); err != nil || json.Unmarshal(e.Value, &v) != nil {
			return linz.Output{Outcome: linz.Unknown}, "undecodable entry: " + detail
		}
		return linz.Output{Outcome: linz.OK, Version: e.Version, Value: v}, ""
	case http.StatusConflict:
		var b contract.ErrorBody
		if err := json.Unmarshal(a.body, &b); err != nil || b.Error.Code != contract.EConflict ||
			b.Error.Field != "expectedVersion" || b.Error.CurrentVersion == nil {
			return linz.Output{Outcome: linz.Unknown}, "unexpected conflict: " + detail
		}
		var cur string
		if *b.Error.CurrentVersion > 0 {
			if err := json.Unmarshal(b.Error.CurrentValue, &cur); err != nil {
				return linz.Output{Outcome: linz.Unknown}, "undecodable current value: " + detail
			}
		}
		// The correlation id names the conflict in the answering
		// writer's log (whoLogged).
		return linz.Output{Outcome: linz.Conflict, Version: *b.Error.CurrentVersion, Value: cur}, "correlationId " + b.Error.CorrelationID
	case http.StatusServiceUnavailable:
		var b contract.ErrorBody
		if json.Unmarshal(a.body, &b) == nil && b.Error.Code == contract.EUnavailable && noEffect(b.Error.Message) {
			return linz.Output{Outcome: linz.Failed}, detail
		}
		return linz.Output{Outcome: linz.Unknown}, detail
	default:
		return linz.Output{Outcome: linz.Unknown}, detail
	}
}

// noEffect reports whether a 503's message is one the writer gives only
// before a request was queued for a transaction (writer/partition.go,
// writer/writer.go, api/forward.go): refused at submit, drained from the
// queue unprocessed, not owned, not forwarded, or decided without
// appending anything and not confirmed. The messages that say
// the outcome is unknown (503 outcome_unknown never reaches here; older
// writers said "may still commit", "outcome is unknown") and the
// forwarding proxy's "did not answer" (the owner may have decided it) are
// unknown, as is anything not listed here (the request deadline's own).
func noEffect(msg string) bool {
	if strings.Contains(msg, "unknown") || strings.Contains(msg, "may still commit") || strings.Contains(msg, "did not answer") {
		return false
	}
	for _, m := range []string{
		"is catching up or moving between writers; retry",      // submit: partition not ready
		"is overloaded; retry",                                 // submit: queue full
		"is moving between writers; retry",                     // failQueued: never batched
		"is not owned by this writer; retry",                   // Do: not owned here
		"is unable to read the projection; retry",              // process: failed before producing
		"is unable to confirm ownership; retry",                // process: decided without appending, not confirmed
		"is not answering in time",                             // Do, DoWait: its deadline passed before it was queued, or it was withdrawn from the queue
		"the key's partition is moving between writers; retry", // forward: not forwarded twice
	} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

func errorCode(body []byte) string {
	var b contract.ErrorBody
	if json.Unmarshal(body, &b) != nil {
		return ""
	}
	return b.Error.Code
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// acknowledged returns the writes of h that were answered 200.
func acknowledged(h []linz.Op) []logcheck.Acked {
	var out []logcheck.Acked
	for _, o := range h {
		if o.In.Kind.Writes() && o.Out.Outcome == linz.OK {
			out = append(out, logcheck.Acked{Key: o.In.Key, Version: o.Out.Version, Value: mustJSON(o.Written())})
		}
	}
	return out
}
