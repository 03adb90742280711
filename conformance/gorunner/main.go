// Command gorunner is the Go client's conformance runner: `gorunner
// <scenario>` runs one scenario of the clients' conformance protocol
// (docs/clients.md, "Conformance") with github.com/eskv/eskv/client
// against $ESKV_URL, as $ESKV_TOKEN, under $ESKV_PREFIX, using the
// harness's control API at $ESKV_CONTROL. It prints each check that held,
// one line each, and exits 0 when all held; else 1, with the reason on
// stderr (2: bad usage).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// runner is one scenario's run: the client, where its keys go, the
// harness's control API.
type runner struct {
	c          *client.Client
	prefix     string
	control    string
	retries    atomic.Int64 // transient errors of calls the client retried (OnRetry)
	reconnects atomic.Int64 // watch connections that ended and were resumed
}

// scenarios are the protocol's seven, by name.
var scenarios = map[string]func(ctx context.Context, r *runner) error{
	"write-then-read":     writeThenRead,
	"cas-conflict":        casConflict,
	"retry-replay":        retryReplay,
	"watch-resume":        watchResume,
	"lock-keepalive-loss": lockKeepaliveLoss,
	"queue-redeliver":     queueRedeliver,
	"txn-refusal":         txnRefusal,
}

func main() {
	if len(os.Args) != 2 || scenarios[os.Args[1]] == nil {
		fmt.Fprintf(os.Stderr, "usage: gorunner <scenario>\nscenarios: %s\n", strings.Join(names(), ", "))
		os.Exit(2)
	}
	r, err := newRunner()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gorunner:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 85*time.Second)
	defer cancel()
	if err := scenarios[os.Args[1]](ctx, r); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	fmt.Printf("PASS %s\n", os.Args[1])
}

func names() []string {
	var out []string
	for n := range scenarios {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// newRunner reads the protocol's environment.
func newRunner() (*runner, error) {
	env := map[string]string{}
	for _, name := range []string{"ESKV_URL", "ESKV_TOKEN", "ESKV_PREFIX", "ESKV_CONTROL"} {
		if env[name] = os.Getenv(name); env[name] == "" {
			return nil, fmt.Errorf("%s is not set", name)
		}
	}
	r := &runner{prefix: env["ESKV_PREFIX"], control: env["ESKV_CONTROL"]}
	// The default policy (transient ×5 with jitter); OnRetry only counts.
	r.c = client.New(env["ESKV_URL"], env["ESKV_TOKEN"], client.WithRetryPolicy(client.RetryPolicy{
		OnRetry: func(_ error, attempt int, _ time.Duration) {
			if attempt == 0 { // a watch's: it reconnects
				r.reconnects.Add(1)
			} else {
				r.retries.Add(1)
			}
		},
	}))
	return r, nil
}

// key is name under the runner's prefix.
func (r *runner) key(name string) string { return r.prefix + name }

// check prints a check that held.
func check(format string, args ...any) { fmt.Printf("ok   "+format+"\n", args...) }

// post POSTs to the harness's control API.
func (r *runner) post(ctx context.Context, path string, q url.Values) error {
	u := r.control + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("control %s: %w", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("control %s: %s", path, resp.Status)
	}
	return nil
}

// failf is a check that did not hold.
func failf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// typed returns err as the client's typed error when its code is code.
func typed(err error, code string) (*contract.Error, bool) {
	var e *contract.Error
	if errors.As(err, &e) && e.Code == code {
		return e, true
	}
	return nil, false
}
