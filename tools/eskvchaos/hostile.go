package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/tools/internal/stats"
)

// The hostile-load phase (-hostile): while an anonymous client, and a
// tenant ("evil") with a valid token of its own, run every attack of
// issue P1 against the writers at once, a well-behaved tenant ("good")
// writes and reads keys of a project on the same partition as evil's.
// It checks what "safe to share" promises: the good tenant's GET and PUT
// p99 stay under hostileP99, it gets no error, every writer's resident
// memory stays under hostileRSS, every writer stays ready, and evil's
// writes are answered 200, 413 or 429, never with a partition outage.
const (
	hostileP99 = 100 * time.Millisecond
	hostileRSS = 400 << 20
	// hostileSeedKeys of hostileSeedBytes (random, incompressible) fill
	// evil's project before the attacks, so that its watches from the
	// start of the partition have a long catch-up and its listings full
	// pages.
	hostileSeedKeys  = 1200
	hostileSeedBytes = 48 << 10
	// hostileBigBytes is the size of evil's oversize values: 100 of them
	// in one transaction are over any batch, 64 at once fill several.
	hostileBigBytes = 60 << 10
)

// Source addresses of the attackers: every 127/8 address reaches the
// writers through loopback, so that limits per remote address see the
// anonymous client and each attack as another host than the good tenant
// (127.0.0.1), as they are in a deployment.
var (
	anonAddr    = net.IPv4(127, 0, 0, 2)
	evilAddr    = net.IPv4(127, 0, 0, 3)
	holdAddr    = net.IPv4(127, 0, 0, 4)
	withholdAdr = net.IPv4(127, 0, 0, 5)
)

// hostileTokens writes the tokens file of the hostile phase into dir and
// returns the writers' environment setting naming it.
func hostileTokens(dir string, good, evil string) (string, error) {
	type grant struct {
		Prefix string   `json:"prefix"`
		Rights []string `json:"rights"`
	}
	type token struct {
		Token     string  `json:"token"`
		Principal string  `json:"principal"`
		Grants    []grant `json:"grants"`
	}
	b, err := json.Marshal(map[string][]token{"tokens": {
		{Token: good, Principal: "good", Grants: []grant{{Prefix: "tenant/good/", Rights: []string{"read", "write"}}}},
		{Token: evil, Principal: "evil", Grants: []grant{{Prefix: "tenant/evil/", Rights: []string{"read", "write"}}}},
	}})
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "tokens.json")
	return "ESKV_TOKENS_FILE=" + path, os.WriteFile(path, b, 0o600)
}

// hostile is one run of the hostile phase.
type hostile struct {
	c          config
	s          *stack
	target     string // the writer every request is sent to
	partition  int32
	goodScope  string
	evilScope  string
	writerURLs []string
	good, evil string // tokens
	stop       chan struct{}
	wg         sync.WaitGroup

	mu       sync.Mutex
	gets     []time.Duration
	puts     []time.Duration
	slow     []string // the good tenant's operations over hostileP99: which, when, how long
	goodErrs []string
	evilCode map[string]int // evil's write answers by status (and code)
	// evilErr is, per "no answer" kind of evilCode, the first such
	// failure: the attack and the client's error, for the report.
	evilErr map[string]string
	counts  map[string]int // attacks sent, by kind
	// stalls are the attacking process's own (nil elsewhere), and
	// longestStall its longest, as it reported.
	stalls       *stallLog
	longestStall time.Duration
	notReady     []string
	rss          map[string]int64 // peak resident bytes per writer
}

// runHostile runs the hostile phase on s and checks its figures.
func runHostile(ctx context.Context, c config, s *stack, stdout io.Writer) error {
	h := &hostile{c: c, s: s, target: s.writers[0].URL, good: s.goodToken, evil: s.evilToken, stop: make(chan struct{}),
		evilCode: map[string]int{}, evilErr: map[string]string{}, counts: map[string]int{}, rss: map[string]int64{}}
	h.goodScope = "tenant/good/project/g"
	h.partition = changelog.Partition(h.goodScope, int32(c.partitions))
	for i := 0; ; i++ {
		scope := fmt.Sprintf("tenant/evil/project/x%d", i)
		if changelog.Partition(scope, int32(c.partitions)) == h.partition {
			h.evilScope = scope
			break
		}
	}
	s.logf("hostile: seeding %d keys of %d KiB in %s (partition %d, shared with %s)",
		hostileSeedKeys, hostileSeedBytes>>10, h.evilScope, h.partition, h.goodScope)
	if err := h.seed(ctx); err != nil {
		return err
	}
	for _, w := range s.writers {
		h.writerURLs = append(h.writerURLs, w.URL)
	}
	s.logf("hostile: attacks for %s, from a process of their own at nice 19", c.hostileDuration)
	attacker, err := h.startAttacker(ctx)
	if err != nil {
		return err
	}
	for range 4 {
		h.run(h.goodClient)
	}
	h.run(h.sampleRSS)
	h.run(h.checkReady)
	err = attacker()
	close(h.stop)
	h.wg.Wait()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return h.report(stdout)
}

// attackerEnv names the environment variable that makes eskvchaos the
// attacking process of -hostile: its value is the attackerSpec.
const attackerEnv = "ESKV_CHAOS_HOSTILE_ATTACKER"

// attackerSpec is what the attacking process attacks, and how long.
type attackerSpec struct {
	Target    string        `json:"target"`
	Writers   []string      `json:"writers"`
	Evil      string        `json:"evil"`
	EvilScope string        `json:"evilScope"`
	Partition int32         `json:"partition"`
	Duration  time.Duration `json:"duration"`
	Attacks   []string      `json:"attacks"`
}

// attackerResult is what the attacking process sent, and how evil's
// writes were answered.
type attackerResult struct {
	Counts   map[string]int    `json:"counts"`
	EvilCode map[string]int    `json:"evilCode"`
	EvilErr  map[string]string `json:"evilErr,omitempty"`
	// LongestStall is the attacking process's longest stall (stallLog).
	LongestStall time.Duration `json:"longestStall"`
}

// startAttacker starts this program again as the attacking process, at
// the lowest CPU priority (nice 19): attackers are other machines in a
// deployment, and here they would otherwise take the writers' share of
// the two CPUs, which is a test of the machine, not of the writers'
// bounds. The returned function waits for it and adds its counts.
func (h *hostile) startAttacker(ctx context.Context) (func() error, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	spec, err := json.Marshal(attackerSpec{Target: h.target, Writers: h.writerURLs, Evil: h.evil, EvilScope: h.evilScope,
		Partition: h.partition, Duration: h.c.hostileDuration, Attacks: h.c.hostileAttacks})
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, "nice", "-n", "19", exe)
	cmd.Env = append(os.Environ(), attackerEnv+"="+string(spec))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() error {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("the attacking process: %w", err)
		}
		var r attackerResult
		if err := json.Unmarshal([]byte(out.String()), &r); err != nil {
			return fmt.Errorf("the attacking process's result %q: %w", out.String(), err)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		maps.Copy(h.counts, r.Counts)
		maps.Copy(h.evilCode, r.EvilCode)
		maps.Copy(h.evilErr, r.EvilErr)
		h.longestStall = r.LongestStall
		return nil
	}, nil
}

// runAttacker is eskvchaos as the attacking process of -hostile: it runs
// the attacks of spec for its duration and prints their counts as JSON.
func runAttacker(specJSON string, stdout io.Writer) error {
	var spec attackerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("%s: %w", attackerEnv, err)
	}
	h := &hostile{c: config{hostileAttacks: spec.Attacks}, target: spec.Target, writerURLs: spec.Writers, evil: spec.Evil,
		evilScope: spec.EvilScope, partition: spec.Partition, stop: make(chan struct{}), evilCode: map[string]int{}, evilErr: map[string]string{}, counts: map[string]int{},
		stalls: &stallLog{}}
	h.run(func() { h.stalls.watch(h.stop) })
	h.attack()
	time.Sleep(spec.Duration)
	close(h.stop)
	h.wg.Wait()
	h.mu.Lock()
	defer h.mu.Unlock()
	return json.NewEncoder(stdout).Encode(attackerResult{Counts: h.counts, EvilCode: h.evilCode, EvilErr: h.evilErr, LongestStall: h.stalls.longestStall()})
}

// run runs f until the phase stops.
func (h *hostile) run(f func()) { h.wg.Go(f) }

func (h *hostile) stopped() bool {
	select {
	case <-h.stop:
		return true
	default:
		return false
	}
}

func (h *hostile) count(kind string) {
	h.mu.Lock()
	h.counts[kind]++
	h.mu.Unlock()
}

// attack starts every attack.
func (h *hostile) attack() {
	on := func(kind string) bool {
		return len(h.c.hostileAttacks) == 0 || slices.Contains(h.c.hostileAttacks, kind)
	}
	if on("login") {
		for range 6 {
			h.run(h.loginBomb)
		}
	}
	if on("oversize") {
		h.run(h.oversizeTxn)
		h.run(h.oversizeBursts)
	}
	after := fmt.Sprintf("p%d.o0", h.partition)
	for range 20 {
		if on("watch") {
			h.run(func() {
				h.hold("unread catch-up watch", "GET /v1/watch?prefix="+url.QueryEscape(h.evilScope+"/")+"&after="+after, 0)
			})
		}
		if on("list") {
			h.run(func() {
				h.hold("held listing", "GET /v1/kv?limit=1000&prefix="+url.QueryEscape(h.evilScope+"/"), 0)
			})
		}
	}
	if on("body") {
		for range 150 {
			h.run(func() { h.hold("withheld body", "POST /v1/txn", 4<<20) })
		}
	}
	if on("forward") {
		h.run(h.forgedForwards)
	}
}

// hostileAttackKinds are the names -hostile-attacks takes.
var hostileAttackKinds = []string{"login", "oversize", "watch", "list", "body", "forward"}

// hclient returns an HTTP client whose connections come from addr.
//
// The transport waits up to expectContinue for a server's answer to a
// request sent with Expect: 100-continue before sending its body.
func hclient(addr net.IP, timeout time.Duration) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: addr}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: 128,
		DisableCompression: true, ExpectContinueTimeout: expectContinue}}
}

// expectContinue is how long hclient's requests sent with Expect:
// 100-continue wait for the server's go-ahead before sending the body
// anyway.
const expectContinue = 5 * time.Second

// randomValue is a JSON string of about n incompressible bytes.
func randomValue(n int) json.RawMessage {
	b := make([]byte, n*3/4)
	_, _ = rand.Read(b)
	return json.RawMessage(strconv.Quote(base64.StdEncoding.EncodeToString(b)))
}

// send sends a request with token and body (JSON-encoded unless nil) and
// returns its status and error code ("" for none), draining the answer.
func send(hc *http.Client, method, url, token string, body any) (int, string, error) {
	return sendWith(hc, method, url, token, body, nil)
}

// sendWith is send with the headers hdr added.
func sendWith(hc *http.Client, method, url, token string, body any, hdr http.Header) (int, string, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		rd = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var e contract.ErrorBody
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if resp.StatusCode >= 300 {
		_ = json.Unmarshal(b, &e)
	}
	return resp.StatusCode, e.Error.Code, nil
}

// seed fills evil's project, 8 writes at a time.
func (h *hostile) seed(ctx context.Context) error {
	hc := hclient(evilAddr, 30*time.Second)
	defer hc.CloseIdleConnections()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := next.Add(1); i <= hostileSeedKeys && ctx.Err() == nil; i = next.Add(1) {
				st, code, err := seedWrite(ctx, hc, fmt.Sprintf("%s/v1/kv/%s/seed/%d", h.target, h.evilScope, i), h.evil)
				if err != nil || st != http.StatusOK {
					failed.Store(fmt.Sprintf("seed write %d: %d %s %v", i, st, code, err))
					return
				}
			}
		})
	}
	wg.Wait()
	if f, ok := failed.Load().(string); ok {
		return errors.New(f)
	}
	return ctx.Err()
}

// seedWrite puts one seed value at url, again after an answer that says
// to retry (503 partition_unavailable, 429), as any client does, for up
// to seedRetryFor: right after the stack is ready the group may still
// move partitions between the writers that just joined it (CI saw a
// seed write answered 503 partition_unavailable 0.1 s after every
// partition had a ready owner).
func seedWrite(ctx context.Context, hc *http.Client, url, token string) (int, string, error) {
	deadline := time.Now().Add(seedRetryFor)
	for {
		st, code, err := send(hc, http.MethodPut, url, token, map[string]any{"value": randomValue(hostileSeedBytes)})
		if err != nil || (st != http.StatusServiceUnavailable && st != http.StatusTooManyRequests) || time.Now().After(deadline) {
			return st, code, err
		}
		select {
		case <-ctx.Done():
			return st, code, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// seedRetryFor is how long seedWrite retries one key.
const seedRetryFor = 30 * time.Second

// goodClient is the well-behaved tenant: a PUT then a GET of one of its
// keys, again and again, each timed.
func (h *hostile) goodClient() {
	hc := hclient(net.IPv4(127, 0, 0, 1), 5*time.Second)
	defer hc.CloseIdleConnections()
	for i := 0; !h.stopped(); i++ {
		key := fmt.Sprintf("%s/v1/kv/%s/k%d", h.target, h.goodScope, i%16)
		for _, m := range []string{http.MethodPut, http.MethodGet} {
			var body any
			if m == http.MethodPut {
				body = map[string]any{"value": map[string]int{"n": i}}
			}
			t0 := time.Now()
			st, code, err := send(hc, m, key, h.good, body)
			d := time.Since(t0)
			h.mu.Lock()
			if d >= hostileP99 {
				h.slow = append(h.slow, fmt.Sprintf("%s at %.1fs took %s", m, time.Since(h.s.t0).Seconds()-d.Seconds(), d.Round(time.Millisecond)))
			}
			if m == http.MethodPut {
				h.puts = append(h.puts, d)
			} else {
				h.gets = append(h.gets, d)
			}
			switch {
			case err != nil:
				h.goodErrs = append(h.goodErrs, m+" "+noAnswer(err))
			case st != http.StatusOK:
				h.goodErrs = append(h.goodErrs, fmt.Sprintf("%s %d %s", m, st, code))
			}
			h.mu.Unlock()
		}
	}
}

// loginBomb posts 40 MB multipart logins to the status page, without a
// token.
func (h *hostile) loginBomb() {
	hc := hclient(anonAddr, 10*time.Second)
	defer hc.CloseIdleConnections()
	const boundary = "hostileboundary"
	for !h.stopped() {
		head := "--" + boundary + "\r\nContent-Disposition: form-data; name=\"token\"; filename=\"t\"\r\n" +
			"Content-Type: application/octet-stream\r\n\r\n"
		tail := "\r\n--" + boundary + "--\r\n"
		body := io.MultiReader(strings.NewReader(head), io.LimitReader(zeros{}, 40<<20), strings.NewReader(tail))
		req, _ := http.NewRequest(http.MethodPost, h.target+"/ui/login", body)
		req.Header.Set("Content-Type", "multipart/form-data; boundary="+boundary)
		h.count("anonymous login bomb")
		if resp, err := hc.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
		}
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// evilWrite records the answer to one of evil's writes, sent at start.
// A write that got no answer while the attacking process itself stalled
// for attackerStarved or more (stalls) counts apart: its client's
// timeout fired while the process did not run, or the process did not
// send the request in time (the writer closes a connection whose request
// headers take over 10 s to come, as it must). That is this machine's
// CPU, not the writer.
func (h *hostile) evilWrite(kind string, start time.Time, st int, code string, err error) {
	now := time.Now()
	var stalled time.Duration
	if err != nil {
		stalled = h.stalls.within(start, now)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[kind]++
	switch {
	case err != nil:
		k := noAnswer(err)
		if stalled >= attackerStarved {
			k = noAnswerStarved
		}
		h.evilCode[k]++
		if _, seen := h.evilErr[k]; !seen {
			h.evilErr[k] = fmt.Sprintf("%s at %s after %s (the attacking process stalled %s of it): %v", kind, now.UTC().Format("15:04:05.000"),
				now.Sub(start).Round(time.Millisecond), stalled.Round(time.Millisecond), err)
		}
	default:
		h.evilCode[strings.TrimSpace(fmt.Sprintf("%d %s", st, code))]++
	}
}

// noAnswerStarved is the kind of evil's writes that got no answer while
// the attacking process stalled (evilWrite).
const noAnswerStarved = "no answer (attacker starved)"

// attackerStarved is how long the attacking process must have stalled
// during a write for its failure to be the process's (evilWrite), and
// stallMin the shortest stall stallLog records.
const (
	attackerStarved = time.Second
	stallMin        = 100 * time.Millisecond
)

// stallLog records when the attacking process did not run: at nice 19 on
// two busy CPUs it can be starved for seconds. A goroutine sleeps
// stallTick at a time and notes each wake-up stallMin or more late. The
// zero stallLog (and a nil one) records nothing.
type stallLog struct {
	mu      sync.Mutex
	stalls  [][2]time.Time // from, to
	longest time.Duration
	last    time.Time // the watching goroutine's last wake-up
}

const stallTick = 20 * time.Millisecond

// watch records stalls until stop closes.
func (l *stallLog) watch(stop <-chan struct{}) {
	t := time.NewTicker(stallTick)
	defer t.Stop()
	l.mu.Lock()
	l.last = time.Now()
	l.mu.Unlock()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := time.Now()
		l.mu.Lock()
		if late := now.Sub(l.last) - stallTick; late >= stallMin {
			l.stalls = append(l.stalls, [2]time.Time{l.last.Add(stallTick), now})
			l.longest = max(l.longest, late)
		}
		l.last = now
		l.mu.Unlock()
	}
}

// longestStall is the longest stall recorded.
func (l *stallLog) longestStall() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.longest
}

// within is how long the process stalled between from and to, counting
// a stall the watching goroutine has not woken from yet (a failed write
// may be seen before it, both runnable again at the stall's end).
func (l *stallLog) within(from, to time.Time) time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	stalls := l.stalls
	if !l.last.IsZero() && to.Sub(l.last)-stallTick >= stallMin {
		stalls = append(stalls[:len(stalls):len(stalls)], [2]time.Time{l.last.Add(stallTick), to})
	}
	var d time.Duration
	for _, s := range stalls {
		if a, b := later(s[0], from), earlier(s[1], to); b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// firstOf is ", the first: <failure>" for a recorded failure, "" for none.
func firstOf(failure string) string {
	if failure == "" {
		return ""
	}
	return ", the first: " + failure
}

// noAnswer names a request's failure without its URL, so that failures
// of one kind count together.
func noAnswer(err error) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "no answer (timeout)"
	}
	return "no answer (connection failed)"
}

// oversizeTxn sends transactions of 100 values of 60 KiB (6 MB, over
// the writer's limit on a transaction's body), as a client sending a
// large body should: with Expect: 100-continue, so that the writer
// refuses it (413) before any of it is sent. Sent without, the writer
// still answers 413 at once, reads at most 1 MiB more of the body, and
// closes the connection; the client, still sending, then meets a reset
// that can destroy the 413 before it reads it (TCP discards what a
// socket had not read when a reset arrives): a client's mistake, not
// the writer's, and one no bound on the reading can remove.
func (h *hostile) oversizeTxn() {
	hc := hclient(evilAddr, 10*time.Second)
	defer hc.CloseIdleConnections()
	for i := 0; !h.stopped(); i++ {
		ops := make([]map[string]any, 100)
		for j := range ops {
			ops[j] = map[string]any{"op": "put", "key": fmt.Sprintf("%s/txn/%d", h.evilScope, j), "value": randomValue(hostileBigBytes)}
		}
		start := time.Now()
		st, code, err := sendWith(hc, http.MethodPost, h.target+"/v1/txn", h.evil, map[string]any{"ops": ops},
			http.Header{"Expect": {"100-continue"}})
		h.evilWrite("oversize transaction", start, st, code, err)
	}
}

// oversizeBursts sends 64 concurrent PUTs of 60 KiB every second.
func (h *hostile) oversizeBursts() {
	hc := hclient(evilAddr, 10*time.Second)
	defer hc.CloseIdleConnections()
	for !h.stopped() {
		var wg sync.WaitGroup
		for j := range 64 {
			wg.Go(func() {
				start := time.Now()
				st, code, err := send(hc, http.MethodPut, fmt.Sprintf("%s/v1/kv/%s/big/%d", h.target, h.evilScope, j), h.evil,
					map[string]any{"value": randomValue(hostileBigBytes)})
				h.evilWrite("concurrent 60 KiB PUT", start, st, code, err)
			})
		}
		wg.Wait()
		pause(h.stop, time.Second)
	}
}

// hold opens a connection as evil, sends the request line and headers
// of request (with a body of bodyBytes declared and all but its last
// byte sent) and then neither finishes the request nor reads the answer
// until the phase ends. When the writer refuses it (an answer other than
// 200) or closes the connection, it opens another.
func (h *hostile) hold(kind, request string, bodyBytes int) {
	src := holdAddr
	if bodyBytes > 0 {
		src = withholdAdr
	}
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
	u, _ := url.Parse(h.target)
	for !h.stopped() {
		conn, err := d.Dial("tcp", u.Host)
		if err != nil {
			pause(h.stop, 100*time.Millisecond)
			continue
		}
		h.count(kind)
		head := request + " HTTP/1.1\r\nHost: " + u.Host + "\r\nAuthorization: Bearer " + h.evil + "\r\n"
		if bodyBytes > 0 {
			head += "Content-Type: application/json\r\nContent-Length: " + strconv.Itoa(bodyBytes) + "\r\n"
		}
		if _, err = io.WriteString(conn, head+"\r\n"); err == nil && bodyBytes > 0 {
			_, err = io.Copy(conn, io.LimitReader(spaces{}, int64(bodyBytes-1)))
		}
		if err == nil && heldOK(conn, h.stop) {
			<-h.stop
		}
		conn.Close()
		// An attacker holding connections, not flooding them: the
		// harness shares the machine's CPUs with the writers.
		pause(h.stop, time.Second)
	}
}

// heldOK waits for the start of the answer on conn and reports whether
// it is a 200 (which the attack then leaves unread); false when the
// connection is closed, the answer is another status, or stop closes.
func heldOK(conn net.Conn, stop chan struct{}) bool {
	got := make(chan bool, 1)
	go func() {
		buf := make([]byte, len("HTTP/1.1 200"))
		_, err := io.ReadFull(conn, buf)
		got <- err == nil && string(buf[9:]) == "200"
	}()
	select {
	case ok := <-got:
		return ok
	case <-stop:
		return false
	}
}

type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// forgedForwards sends, as evil and anonymously, requests claiming to
// have been forwarded by each writer.
func (h *hostile) forgedForwards() {
	hc := hclient(evilAddr, 5*time.Second)
	defer hc.CloseIdleConnections()
	for !h.stopped() {
		for _, w := range h.writerURLs {
			for _, tok := range []string{h.evil, ""} {
				req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/kv/%s/seed/1", w, h.evilScope), nil)
				req.Header.Set("Eskv-Forwarded-By", w)
				if tok != "" {
					req.Header.Set("Authorization", "Bearer "+tok)
				}
				h.count("forged Eskv-Forwarded-By")
				if resp, err := hc.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
					resp.Body.Close()
				}
			}
		}
		pause(h.stop, 500*time.Millisecond)
	}
}

// checkReady polls every writer's /readyz.
func (h *hostile) checkReady() {
	hc := hclient(net.IPv4(127, 0, 0, 1), 2*time.Second)
	for !h.stopped() {
		for _, w := range h.s.writers {
			resp, err := hc.Get(w.URL + "/readyz")
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			if err != nil || resp.StatusCode != http.StatusOK {
				h.mu.Lock()
				h.notReady = append(h.notReady, fmt.Sprintf("%s at %s", w.Name, time.Since(h.s.t0).Round(100*time.Millisecond)))
				h.mu.Unlock()
			}
		}
		pause(h.stop, 250*time.Millisecond)
	}
}

// sampleRSS records each writer's peak resident memory.
func (h *hostile) sampleRSS() {
	for !h.stopped() {
		for _, w := range h.s.writers {
			if rss, err := stats.StatusBytes(w.PID(), "VmRSS"); err == nil {
				h.mu.Lock()
				h.rss[w.Name] = max(h.rss[w.Name], rss)
				h.mu.Unlock()
			}
		}
		pause(h.stop, 100*time.Millisecond)
	}
}

// p99 is the nearest-rank 99th percentile of ds (as make bench's).
func p99(ds []time.Duration) time.Duration {
	return stats.Quantile(slices.Sorted(slices.Values(ds)), 0.99)
}

// report prints the phase's figures and checks them.
func (h *hostile) report(w io.Writer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	getP, putP := p99(h.gets), p99(h.puts)
	fmt.Fprintf(w, "eskvchaos -hostile: %s of attacks on %s (partition %d shared by %s and %s)\n",
		h.c.hostileDuration, h.target, h.partition, h.evilScope, h.goodScope)
	for _, k := range slices.Sorted(maps.Keys(h.counts)) {
		fmt.Fprintf(w, "  attack %-28s %6d\n", k+":", h.counts[k])
	}
	for _, k := range slices.Sorted(maps.Keys(h.evilCode)) {
		fmt.Fprintf(w, "  evil's writes answered %-40s %6d\n", k+":", h.evilCode[k])
	}
	fmt.Fprintf(w, "  the attacking process's longest stall (nice 19): %s\n", h.longestStall.Round(time.Millisecond))
	fmt.Fprintf(w, "  good tenant: %d GETs p99 %s, %d PUTs p99 %s, %d errors\n", len(h.gets), getP.Round(100*time.Microsecond),
		len(h.puts), putP.Round(100*time.Microsecond), len(h.goodErrs))
	var failures []string
	for _, name := range slices.Sorted(maps.Keys(h.rss)) {
		fmt.Fprintf(w, "  %s peak RSS %d MiB\n", name, h.rss[name]>>20)
		if h.rss[name] >= hostileRSS {
			failures = append(failures, fmt.Sprintf("%s peak RSS %d MiB, not under %d MiB", name, h.rss[name]>>20, hostileRSS>>20))
		}
	}
	fmt.Fprintf(w, "  /readyz not 200: %d times\n", len(h.notReady))
	for i, sl := range h.slow {
		if i == 20 {
			fmt.Fprintf(w, "  ... %d more slow operations\n", len(h.slow)-i)
			break
		}
		fmt.Fprintf(w, "  slow: %s\n", sl)
	}
	if getP >= hostileP99 || putP >= hostileP99 {
		failures = append(failures, fmt.Sprintf("good tenant's p99 GET %s, PUT %s: not under %s", getP, putP, hostileP99))
	}
	if len(h.gets) == 0 || len(h.puts) == 0 {
		failures = append(failures, "the good tenant completed no request")
	}
	if n := len(h.goodErrs); n > 0 {
		failures = append(failures, fmt.Sprintf("good tenant: %d errors, first %s", n, h.goodErrs[0]))
	}
	if n := len(h.notReady); n > 0 {
		failures = append(failures, fmt.Sprintf("a writer was not ready %d times, first %s", n, h.notReady[0]))
	}
	if n := h.evilCode[noAnswerStarved]; n > 0 {
		fmt.Fprintf(w, "  not counted against the writer: %d of evil's writes got no answer while the attacking process stalled %s or more%s\n",
			n, attackerStarved, firstOf(h.evilErr[noAnswerStarved]))
	}
	for k, n := range h.evilCode {
		if k == noAnswerStarved {
			continue
		}
		if !strings.HasPrefix(k, "200") && !strings.HasPrefix(k, "413") && !strings.HasPrefix(k, "429") {
			failures = append(failures, fmt.Sprintf("evil's writes answered %q %d times (want only 200, 413 or 429)%s", k, n, firstOf(h.evilErr[k])))
		}
	}
	for _, f := range failures {
		fmt.Fprintf(w, "FAIL hostile: %s\n", f)
	}
	if len(failures) > 0 {
		return errChecksFailed
	}
	fmt.Fprintln(w, "hostile: every check passed")
	return nil
}
