package proc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// WaitFor polls ok every 100 ms until it holds, p (when not nil) exits,
// ctx ends or timeout passes; the error names what was awaited.
func WaitFor(ctx context.Context, timeout time.Duration, what string, p *Proc, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if p != nil && !p.Alive() {
			return fmt.Errorf("waiting for %s: %s exited: %v", what, p.Name, p.Err())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}

// probe is the client of readiness checks: a check that hangs counts as
// not ready.
var probe = &http.Client{Timeout: 2 * time.Second}

// WaitHTTP waits until GET url answers 200 (see WaitFor).
func WaitHTTP(ctx context.Context, timeout time.Duration, p *Proc, url string) error {
	return WaitFor(ctx, timeout, url+" to answer 200", p, func() bool { return HTTPOK(url) })
}

// HTTPOK reports whether GET u answers 200 within two seconds.
func HTTPOK(u string) bool {
	resp, err := probe.Get(u)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitAddrFile waits until p wrote the address it listens on (host:port,
// port not 0) to path, as the services do with ESKV_*ADDR_FILE.
func WaitAddrFile(ctx context.Context, timeout time.Duration, p *Proc, path string) (string, error) {
	var addr string
	err := WaitFor(ctx, timeout, p.Name+" to report its address in "+path, p, func() bool {
		b, err := os.ReadFile(path)
		addr = strings.TrimSpace(string(b))
		if err != nil || addr == "" {
			return false
		}
		_, port, err := net.SplitHostPort(addr)
		return err == nil && port != "" && port != "0"
	})
	return addr, err
}

// PortOpen reports whether a TCP connection to addr succeeds within a
// second.
func PortOpen(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// FreePorts returns n distinct ports of 127.0.0.1 that were free a moment
// ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close() // held until all are chosen, so they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
