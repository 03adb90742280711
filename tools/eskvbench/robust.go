package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/tools/internal/stats"
)

// Figure 11: hostile connections. -robust-conns connections of each kind
// are opened against the writer at once — requests that declare a body
// and never send it (half of them with a token), idle keep-alives, and
// clients that ask for a large listing and read nothing — while one
// normal client PUTs and GETs a key. The figure is the normal client's
// p99, the writer's peak resident memory meanwhile (VmRSS, sampled), and
// how many of the hostile connections the writer closed within its
// timeouts.
const (
	targetRobustP99      = 50 * time.Millisecond
	targetRobustRSSBytes = 300 << 20
	// robustValues values of robustValueBytes under one prefix make a
	// listing of about 3.8 MB: a page just under the default byte budget.
	robustValues     = 64
	robustValueBytes = 60 << 10
	// robustSlack is how long past its timeout a connection may take to
	// be closed (a loaded machine, 1,500 connections).
	robustSlack = 5 * time.Second
)

// The writer's HTTP timeouts in the bench's own stack (its ESKV_HTTP_*
// variables), shorter than the defaults so that figure 11 takes seconds
// rather than minutes; with -url, -robust-read-timeout and the others
// say the target's.
const (
	benchReadTimeout  = 5 * time.Second
	benchWriteTimeout = 10 * time.Second
	benchIdleTimeout  = 15 * time.Second
)

// robustKind is one kind of hostile connection.
type robustKind struct {
	name    string
	request string
	stall   time.Duration // how long the client reads nothing
	within  time.Duration // from the request, when the writer must have closed it
}

// robust is figure 11.
func (b *bench) robust(ctx context.Context) []result {
	title := fmt.Sprintf("PUT+GET, 1 client, under %d×3 hostile connections", b.c.robustConns)
	prefix := b.key("robust-"+b.runID, "big/")
	if err := b.seedLarge(ctx, prefix); err != nil {
		return []result{{Step: "11", Title: title, Verdict: verdictSkip, Note: err.Error()}}
	}
	kinds := b.robustKinds(prefix)
	var rss rssSampler
	stopRSS := rss.start(b.s.writerPID)
	var late, closed atomic.Int64
	var wg sync.WaitGroup
	held, cancelHeld := context.WithCancel(ctx)
	for _, k := range kinds {
		for i := range b.c.robustConns {
			wg.Go(func() {
				req := k.request
				if k.name == "unsent" && i%2 == 1 {
					req = strings.Replace(req, "Authorization: "+b.auth+"\r\n", "", 1)
				}
				if _, err := proc.HoldConn(held, strings.TrimPrefix(b.s.writerURL, "http://"), req, k.stall, k.within+robustSlack); err != nil {
					late.Add(1)
					return
				}
				closed.Add(1)
			})
		}
	}
	allClosed := make(chan struct{})
	go func() { wg.Wait(); close(allClosed) }()
	lat, errs, elapsed := b.putGetUntil(ctx, b.key("robust-"+b.runID, "normal"), allClosed)
	cancelHeld()
	<-allClosed
	peak := stopRSS()

	r := newResult("11a", title, summarize(lat), errs, elapsed)
	r.target(targetP99, targetRobustP99)
	mem := result{Step: "11b", Title: "writer peak RSS during 11a", Target: "≤ " + fmtBytes(targetRobustRSSBytes)}
	switch {
	case b.s.writerPID == 0:
		mem.Verdict, mem.Note = verdictSkip, "no writer pid (-writer-pid)"
	case peak == 0:
		mem.Verdict, mem.Note = verdictSkip, "could not read the writer's VmRSS"
	default:
		mem.Verdict, mem.Note = verdictPass, fmt.Sprintf("peak VmRSS %s (sampled every 50ms)", fmtBytes(peak))
		if peak > targetRobustRSSBytes {
			mem.Verdict = verdictMiss
		}
	}
	total := int64(3 * b.c.robustConns)
	conns := result{Step: "11c", Title: "hostile connections closed by the writer within its timeouts", Ops: int(closed.Load()),
		Errors: int(late.Load()), Target: fmt.Sprintf("all %d", total), Verdict: verdictPass,
		Note: fmt.Sprintf("read %s, write %s, idle %s, each + %s; %d closed late or not at all", b.c.robustRead, b.c.robustWrite, b.c.robustIdle, robustSlack, late.Load())}
	if closed.Load() != total {
		conns.Verdict = verdictMiss
	}
	return []result{r, mem, conns}
}

// robustKinds are the hostile connections of figure 11 and when the
// writer must have closed each.
func (b *bench) robustKinds(prefix string) []robustKind {
	auth := "Authorization: " + b.auth + "\r\n"
	return []robustKind{
		{"unsent", "PUT /v1/kv/" + prefix + "unsent HTTP/1.1\r\nHost: eskvbench\r\n" + auth +
			"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"value\":", 0, b.c.robustRead},
		{"idle", "GET /healthz HTTP/1.1\r\nHost: eskvbench\r\n\r\n", 0, b.c.robustIdle},
		{"slow-reader", "GET /v1/kv?limit=1000&prefix=" + prefix + " HTTP/1.1\r\nHost: eskvbench\r\n" + auth + "\r\n",
			b.c.robustWrite, b.c.robustWrite + b.c.robustIdle},
	}
}

// seedLarge writes robustValues values of robustValueBytes under prefix
// and waits until they are listed.
func (b *bench) seedLarge(ctx context.Context, prefix string) error {
	body := []byte(`{"value":"` + strings.Repeat("v", robustValueBytes) + `"}`)
	for i := range robustValues {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("%s/v1/kv/%s%03d", b.s.writerURL, prefix, i), bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header["Authorization"] = []string{b.auth}
		req.Header["Content-Type"] = []string{"application/json"}
		resp, err := b.hc.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("seeding large values: PUT answered %d", resp.StatusCode)
		}
	}
	_, err := b.waitProjected(ctx, prefix, robustValues)
	return err
}

// putGetUntil PUTs and GETs key, one after the other, until done is
// closed, and returns the latencies of both.
func (b *bench) putGetUntil(ctx context.Context, key string, done <-chan struct{}) (latencies, errorCounts, time.Duration) {
	var lat latencies
	errs := errorCounts{}
	st := &writeState{key: key}
	var buf bytes.Buffer
	start := time.Now()
	for ctx.Err() == nil {
		select {
		case <-done:
			return lat, errs, time.Since(start)
		default:
		}
		for _, op := range []func() (int, error){
			func() (int, error) { return b.cas(ctx, st) },
			func() (int, error) { return b.get(ctx, key, &buf) },
		} {
			t0 := time.Now()
			status, err := op()
			if err != nil || status != http.StatusOK {
				errs[status]++
				backoff(ctx, status)
				continue
			}
			lat = append(lat, time.Since(t0))
		}
	}
	return lat, errs, time.Since(start)
}

// rssSampler records the highest VmRSS of a process while it runs.
type rssSampler struct {
	peak atomic.Int64
}

// start samples pid's VmRSS every 50ms until the returned function is
// called, which returns the highest (0 when pid is 0 or unreadable).
func (s *rssSampler) start(pid int) func() int64 {
	if pid == 0 {
		return func() int64 { return 0 }
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := stats.StatusBytes(pid, "VmRSS"); err == nil && v > s.peak.Load() {
				s.peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return s.peak.Load()
	}
}
