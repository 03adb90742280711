package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eskv/eskv/contract"
)

// maxAnswerBytes bounds an answer's body: a full list page (1000 entries
// of at most 64 KiB each, by default) fits.
const maxAnswerBytes = 256 << 20

// Client calls one eskv HTTP API with one bearer token. It is safe for
// concurrent use.
type Client struct {
	base      string
	token     string
	hc        *http.Client
	policy    RetryPolicy
	userAgent string
	directive string
	tls       *tls.Config
	// err is an option's failure (WithCAFile's unreadable file): every
	// call fails with it.
	err error
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (default: a client without
// its own timeout, ctx bounds each call, on a transport the process's
// Clients share: http.DefaultTransport's settings but for 100 idle
// connections a server instead of 2, so that the goroutines sharing a
// Client reuse their connections).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetries sets how many times a retryable request is tried in all
// (1 disables retries) and the bounds of the exponential wait between
// tries. A server's Retry-After is honoured even when longer than maxWait.
func WithRetries(attempts int, minWait, maxWait time.Duration) Option {
	return func(c *Client) {
		c.policy.Attempts, c.policy.MinWait, c.policy.MaxWait = max(attempts, 1), minWait, maxWait
	}
}

// WithTLSConfig sets the TLS configuration of https:// base URLs (its
// RootCAs trust the server's CA; nil RootCAs: the system's roots; a
// client certificate for mutual TLS). It applies to the transport of the
// HTTP client (WithHTTPClient's, whichever order the options come in),
// which must then be an *http.Transport or nil.
func WithTLSConfig(cfg *tls.Config) Option { return func(c *Client) { c.tls = cfg } }

// WithCAFile trusts the PEM certificates of the file path (the CA that
// signed the server's certificate) for https:// base URLs, instead of
// the system's roots (WithTLSConfig). A file that does not read or holds
// no certificate makes every call fail with an error naming it.
func WithCAFile(path string) Option {
	return func(c *Client) {
		pool, err := loadCAFile(path)
		if err != nil {
			c.err = errors.Join(c.err, err)
			return
		}
		c.tls = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	}
}

// loadCAFile reads a PEM bundle of certificates.
func loadCAFile(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("client: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("client: CA file %s holds no PEM certificate", path)
	}
	return pool, nil
}

// sharedTransport is the transport of the Clients given no HTTP client:
// http.DefaultTransport's settings, but keeping up to 100 idle
// connections a server (MaxIdleConns, all servers together, is 100
// too), not 2. A Client is shared by a program's goroutines: with 2,
// each call beyond the second in flight dialled a connection and closed
// it after (a TCP, and a TLS, handshake a call, on both sides). One for
// the process, as DefaultTransport is, so Clients made per call share
// their connections.
var sharedTransport = sync.OnceValue(func() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 100
	return t
})

// withTLS returns hc with cfg on a copy of its transport.
func withTLS(hc *http.Client, cfg *tls.Config) (*http.Client, error) {
	var t *http.Transport
	switch rt := hc.Transport.(type) {
	case nil:
		t = sharedTransport().Clone()
	case *http.Transport:
		t = rt.Clone()
	default:
		return nil, fmt.Errorf("client: WithTLSConfig needs the HTTP client's Transport to be an *http.Transport, not %T", rt)
	}
	t.TLSClientConfig = cfg.Clone()
	out := *hc
	out.Transport = t
	return &out, nil
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithDirective names the directive every write of the client is made
// for, in the Eskv-Directive header (docs/api.md, "Directives"): how a
// service account, whose principal names no directive, attributes its
// writes to one. A principal named <agent>:<directive> needs none (a
// different one is refused). The server checks it: 1 to 64 characters of
// A-Z a-z 0-9 . _ -, else every write answers 400 invalid naming the
// header. DirectiveContext overrides it for one call.
func WithDirective(directive string) Option { return func(c *Client) { c.directive = directive } }

// directiveKey is the context key of DirectiveContext.
type directiveKey struct{}

// DirectiveContext returns ctx naming directive for the calls made with
// it, over the client's WithDirective: a client shared by the tasks of
// one service account writes each task's calls under its own directive.
func DirectiveContext(ctx context.Context, directive string) context.Context {
	return context.WithValue(ctx, directiveKey{}, directive)
}

// directiveOf is the directive of a call made with ctx.
func (c *Client) directiveOf(ctx context.Context) string {
	if d, ok := ctx.Value(directiveKey{}).(string); ok {
		return d
	}
	return c.directive
}

// New returns a client of the API at baseURL (for example
// http://127.0.0.1:8080) that authenticates with token. A malformed
// baseURL makes every call fail.
func New(baseURL, token string, opts ...Option) *Client {
	c := &Client{
		base:      strings.TrimRight(baseURL, "/"),
		token:     token,
		hc:        &http.Client{Transport: sharedTransport()},
		policy:    DefaultRetryPolicy(),
		userAgent: "eskv-go-client",
	}
	for _, o := range opts {
		o(c)
	}
	if c.tls != nil && c.err == nil {
		c.hc, c.err = withTLS(c.hc, c.tls)
	}
	return c
}

// BaseURL returns the API's base URL as the client uses it.
func (c *Client) BaseURL() string { return c.base }

// NetworkError is a request that got no HTTP answer: the server could not
// be reached, the connection broke, or ctx ended first. Err is the cause
// (errors.Is(err, context.DeadlineExceeded) works through it). A write
// that failed this way may or may not have been applied.
type NetworkError struct {
	Method string // the request's method
	URL    string // the request's URL
	Err    error  // why no answer came
}

// Error says which request got no answer, and why.
func (e *NetworkError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *NetworkError) Unwrap() error { return e.Err }

// ErrUnexpectedAnswer marks an error answer whose body is not eskv's
// error JSON (a proxy's page, another service on the URL). The error also
// holds an *contract.Error: internal, or partition_unavailable for 429,
// 502, 503 and 504 (transient, see RetryPolicy), so it is never mistaken
// for an answer about the key.
var ErrUnexpectedAnswer = errors.New("the answer is not from eskv's API")

// call is one API request.
type call struct {
	method string
	path   string // escaped
	query  url.Values
	body   []byte
	key    string // the key addressed, for Error.Current
	retry  bool   // safe to repeat
	// wait is a blocking wait (contract.Waits): each attempt asks what
	// is left of it (do).
	wait time.Duration
}

func (c *Client) once(ctx context.Context, cl call, out any) (http.Header, error) {
	u := c.base + cl.path
	if len(cl.query) > 0 {
		u += "?" + cl.query.Encode()
	}
	var body io.Reader
	if cl.body != nil {
		body = bytes.NewReader(cl.body)
	}
	resp, err := c.send(ctx, cl.method, u, body, "application/json")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, &NetworkError{Method: cl.method, URL: u, Err: fmt.Errorf("read answer: %w", err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				return nil, fmt.Errorf("client: decode answer of %s %s: %w", cl.method, u, err)
			}
		}
		return resp.Header, nil
	}
	return resp.Header, answerError(resp, b, cl.key)
}

// expectContinueBytes is the body size above which a request asks the
// server first (Expect: 100-continue, as curl does above 1 MiB): a body
// over the server's limit is then refused (413 value_too_large) before
// it is sent, instead of being sent in full to a server that has already
// answered and closed the connection, which can reach the client as a
// reset in place of the answer. The transport sends the body anyway when
// the server says nothing for its ExpectContinueTimeout (1 s in the
// Clients' own transport, as in http.DefaultTransport; a transport whose
// timeout is zero sends it at once).
const expectContinueBytes = 1 << 20

// send sends one request with the client's headers (a body is JSON);
// no answer at all is a *NetworkError.
func (c *Client) send(ctx context.Context, method, u string, body io.Reader, accept string) (*http.Response, error) {
	if c.err != nil {
		return nil, c.err
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("client: build request for %s: %w", u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.ContentLength > expectContinueBytes {
		req.Header.Set("Expect", "100-continue")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.userAgent)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if d := c.directiveOf(ctx); d != "" {
		req.Header.Set(contract.DirectiveHeader, d)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &NetworkError{Method: method, URL: u, Err: err}
	}
	return resp, nil
}

// answerError turns an error answer into an *contract.Error; see
// ErrUnexpectedAnswer for bodies that are not eskv's.
func answerError(resp *http.Response, b []byte, key string) error {
	var body struct {
		Error *contract.ErrorDetail `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil || body.Error == nil || body.Error.Code == "" {
		e := &contract.Error{Code: contract.EInternal, Message: fmt.Sprintf("unexpected answer %s from %s: %s",
			resp.Status, resp.Request.URL.Redacted(), snippet(b))}
		if unexpectedTransient[resp.StatusCode] {
			e.Code = contract.EUnavailable
			e.RetryAfterSeconds = headerRetryAfter(resp.Header)
		}
		return fmt.Errorf("%w: %w", ErrUnexpectedAnswer, e)
	}
	e := body.Error.AsError(key)
	if e.RetryAfterSeconds == 0 {
		e.RetryAfterSeconds = headerRetryAfter(resp.Header)
	}
	return e
}

func headerRetryAfter(h http.Header) int {
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil && n > 0 {
		return n
	}
	if t, err := http.ParseTime(v); err == nil {
		if s := int(time.Until(t).Round(time.Second) / time.Second); s > 0 {
			return s
		}
	}
	return 0
}

func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
