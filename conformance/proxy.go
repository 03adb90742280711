// Package conformance runs the clients' conformance scenarios (go,
// python, typescript) against a real stack as processes behind a
// fail-over proxy (docs/clients.md, "Conformance"). This file is the
// proxy: it sends every request to the first live writer, as a
// Kubernetes Service would, and can be told to drop the next answer of a
// path after the writer applied the request.
package conformance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/eskv/eskv/contract"
)

// Proxy is the fail-over HTTP proxy in front of the writers.
type Proxy struct {
	mu        sync.Mutex
	backends  []*backend
	preferred int      // the writer requests go to while it is up
	armed     []string // path prefixes whose next answer is dropped
}

type backend struct {
	name string
	up   bool
	rp   *httputil.ReverseProxy
}

// NewProxy returns a proxy to the writers at urls (w0, w1, ...: each up).
func NewProxy(urls []string) (*Proxy, error) {
	p := &Proxy{}
	for i, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("proxy: writer %d's URL: %w", i, err)
		}
		rp := &httputil.ReverseProxy{
			Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(u) },
			FlushInterval: -1, // watch and SSE streams go through at once
			// A killed writer cuts its streams mid-body by design.
			ErrorLog: log.New(io.Discard, "", 0),
			// ExpectContinueTimeout as http.DefaultTransport's: a client's
			// Expect: 100-continue reaches the writer, which refuses a body
			// over its limit from the head, before the client sends it
			// (with 0 the proxy reads and forwards it at once, and the
			// writer's refusal meets the client as a reset).
			Transport: &http.Transport{MaxIdleConnsPerHost: 64, ExpectContinueTimeout: time.Second},
			ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
				// Not eskv's answer: a gateway's, which clients retry.
				http.Error(w, "conformance proxy: writer unreachable", http.StatusBadGateway)
			},
		}
		p.backends = append(p.backends, &backend{name: fmt.Sprintf("w%d", i), up: true, rp: rp})
	}
	return p, nil
}

// Current is the index of the writer requests go to now (the preferred
// one while it is up, else the first one up), or -1 when none is.
func (p *Proxy) Current() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.current()
}

func (p *Proxy) current() int {
	if p.backends[p.preferred].up {
		return p.preferred
	}
	for i, b := range p.backends {
		if b.up {
			return i
		}
	}
	return -1
}

// SetUp marks writer i live (up) or not: requests go to the first live
// one.
func (p *Proxy) SetUp(i int, up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends[i].up = up
}

// Prefer sends requests to writer i while it is up (w0 until called).
func (p *Proxy) Prefer(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.preferred = i
}

// Name is writer i's name (w0, w1, ...).
func (p *Proxy) Name(i int) string { return p.backends[i].name }

// DropNext arms the proxy: the next request whose URL path starts with
// prefix and that the writer answers with a success (2xx: it applied
// the request) is forwarded and answered by the writer, then the
// client's connection is closed without the answer. Failures before it
// go through.
func (p *Proxy) DropNext(prefix string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = append(p.armed, prefix)
}

// take reports whether path's answer is to be dropped, disarming the
// prefix it returns.
func (p *Proxy) take(path string) (string, bool) {
	for i, prefix := range p.armed {
		if strings.HasPrefix(path, prefix) {
			p.armed = append(p.armed[:i], p.armed[i+1:]...)
			return prefix, true
		}
	}
	return "", false
}

// ServeHTTP forwards r to the current writer.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	i := p.current()
	prefix, drop := "", false
	if i >= 0 {
		prefix, drop = p.take(r.URL.Path)
	}
	p.mu.Unlock()
	if i < 0 {
		http.Error(w, "conformance proxy: no writer up", http.StatusServiceUnavailable)
		return
	}
	if !drop {
		p.backends[i].rp.ServeHTTP(w, r)
		return
	}
	// The writer processes the request and answers in full; the client
	// gets nothing but a closed connection. An answer that is not a
	// success applied nothing (a partition moving between writers): it
	// goes through, and the next one is dropped instead.
	rec := &recorder{h: http.Header{}, code: http.StatusOK}
	p.backends[i].rp.ServeHTTP(rec, r)
	if rec.code < 200 || rec.code > 299 {
		p.DropNext(prefix)
		rec.replay(w)
		return
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // closes the connection too
	}
	conn.Close()
}

// recorder is a ResponseWriter that keeps the answer.
type recorder struct {
	h    http.Header
	code int
	body bytes.Buffer
}

func (d *recorder) Header() http.Header         { return d.h }
func (d *recorder) Write(b []byte) (int, error) { return d.body.Write(b) }
func (d *recorder) WriteHeader(code int)        { d.code = code }

// replay writes the kept answer to w.
func (d *recorder) replay(w http.ResponseWriter) {
	for k, v := range d.h {
		w.Header()[k] = v
	}
	w.WriteHeader(d.code)
	_, _ = w.Write(d.body.Bytes())
}

// Control is the harness's control API (plain HTTP, no auth):
// POST /kill-writer and POST /drop-next-response?path=<prefix>. kill
// kills the writer the proxy sends to (its index) and starts it again in
// the background; it answers the killed writer's name.
func Control(p *Proxy, kill func(i int) (string, error)) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /kill-writer", func(w http.ResponseWriter, _ *http.Request) {
		i := p.Current()
		if i < 0 {
			writeError(w, http.StatusServiceUnavailable, contract.ErrorDetail{Code: contract.EUnavailable, Message: "no writer up"})
			return
		}
		name, err := kill(i)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, contract.ErrorDetail{Code: contract.EUnavailable, Message: err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"killed": name})
	})
	mux.HandleFunc("POST /drop-next-response", func(w http.ResponseWriter, r *http.Request) {
		prefix := r.URL.Query().Get("path")
		if !strings.HasPrefix(prefix, "/") {
			writeError(w, http.StatusBadRequest, contract.ErrorDetail{Code: contract.EInvalid, Field: "path",
				Message: "path must be a URL path prefix starting with /"})
			return
		}
		p.DropNext(prefix)
		writeJSON(w, http.StatusOK, map[string]bool{"armed": true})
	})
	return mux
}

// writeError answers an error as eskv's API does ({"error":{...}}).
func writeError(w http.ResponseWriter, status int, d contract.ErrorDetail) {
	writeJSON(w, status, contract.ErrorBody{Error: d})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
