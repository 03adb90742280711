// Package servicetest runs a command built on service.Serve in-process in
// a test: started in the background, reached at the address it reports,
// stopped at cleanup.
package servicetest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/testenv"
)

// Timeout bounds each wait of Start and Get's callers.
const Timeout = 30 * time.Second

// Start runs run in the background until the test ends (see
// testenv.RunUntilCleanup) and waits for it to write its bound address to
// addrFile; it returns the service's base URL ("http://host:port").
func Start(tb testing.TB, name, addrFile string, run func(context.Context) error) (string, *testenv.Running) {
	tb.Helper()
	r := testenv.RunUntilCleanup(tb, name, run)
	var addr []byte
	testenv.WaitFor(tb, Timeout, name+"'s address in "+addrFile, func() bool {
		select {
		case <-r.Done():
			tb.Fatalf("%s returned before listening: %v", name, r.Wait(tb, 0))
		default:
		}
		var err error
		addr, err = os.ReadFile(addrFile)
		return err == nil && len(addr) > 0
	})
	return "http://" + string(addr), r
}

// Get returns the status and body of GET url; a request that fails is
// status 0 with the error as its body.
func Get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// WaitStarting waits until logs holds warning, the line a service logs
// while a dependency it opens at start does not answer, and checks that
// the service answers meanwhile (service.Starting): GET base+path 503
// "the service is starting" for each path (/readyz always), /healthz
// 200.
func WaitStarting(tb testing.TB, base string, logs fmt.Stringer, warning string, paths ...string) {
	tb.Helper()
	testenv.WaitFor(tb, Timeout, "the warning "+strconv.Quote(warning), func() bool {
		return strings.Contains(logs.String(), warning)
	})
	if code, body := Get(base + "/healthz"); code != http.StatusOK {
		tb.Errorf("/healthz while starting: %d %q", code, body)
	}
	for _, path := range append([]string{"/readyz"}, paths...) {
		if code, body := Get(base + path); code != http.StatusServiceUnavailable || !strings.Contains(body, "the service is starting") {
			tb.Errorf("%s while starting: %d %q", path, code, body)
		}
	}
}

// WaitReady waits for GET base+"/readyz" to answer 200.
func WaitReady(tb testing.TB, base string) {
	tb.Helper()
	testenv.WaitFor(tb, Timeout, base+"/readyz", func() bool {
		code, _ := Get(base + "/readyz")
		return code == http.StatusOK
	})
}

// HelpMentions runs a command's run with args (ending in -h): it must
// answer flag.ErrHelp and its help, on stderr, must name each of vars,
// the environment the command reads.
func HelpMentions(tb testing.TB, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error, args []string, vars ...string) {
	tb.Helper()
	var stderr bytes.Buffer
	if err := run(context.Background(), args, io.Discard, &stderr); !errors.Is(err, flag.ErrHelp) {
		tb.Fatalf("%v: %v, want flag.ErrHelp", args, err)
	}
	for _, v := range vars {
		if !strings.Contains(stderr.String(), v) {
			tb.Errorf("%v does not mention %s:\n%s", args, v, stderr.String())
		}
	}
}
