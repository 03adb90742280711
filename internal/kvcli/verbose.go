package kvcli

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// verboseTransport says each request and its answer on w (--verbose):
// the method and path (keys are names, not values), the status and the
// time taken. Never a body, a query string (a --where value) or a header
// (the token).
type verboseTransport struct {
	next http.RoundTripper
	w    io.Writer
}

func (t *verboseTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	path := r.URL.EscapedPath()
	if r.URL.RawQuery != "" {
		path += "?..."
	}
	start := time.Now()
	res, err := t.next.RoundTrip(r)
	took := time.Since(start).Round(time.Microsecond)
	if err != nil {
		fmt.Fprintf(t.w, "kvctl: %s %s%s: no answer after %v: %v\n", r.Method, r.URL.Host, printable(path), took, err)
		return res, err
	}
	fmt.Fprintf(t.w, "kvctl: %s %s%s: %s in %v\n", r.Method, r.URL.Host, printable(path), res.Status, took)
	return res, nil
}

// noteVerboseRetry says a retry under --verbose: the attempt that failed,
// its class and error code, and the wait (not the error's message, which
// may quote a current value).
func (a *app) noteVerboseRetry(err error, attempt int, wait time.Duration) {
	if !a.verbose {
		return
	}
	code := contract.ErrorCode(err)
	if code == "" {
		code = "no answer"
	}
	fmt.Fprintf(a.stderr, "kvctl: attempt %d failed (%s, %s): retrying in %v\n", attempt, client.Classify(err), code, wait)
}
