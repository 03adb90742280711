package testenv

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// ForwardLater returns a local address where connections are refused
// until after has passed, and then forwarded to target: a dependency
// that comes up after the service that needs it. The forwarder stops at
// the test's cleanup.
func ForwardLater(tb testing.TB, target string, after time.Duration) string {
	tb.Helper()
	addr, open := ForwardWhen(tb, target)
	t := time.AfterFunc(after, open)
	tb.Cleanup(func() { t.Stop() })
	return addr
}

// ForwardWhen returns a local address where connections are refused
// until open is called, and then forwarded to target (ForwardLater, at a
// moment of the test's choosing). The forwarder stops at the test's
// cleanup.
func ForwardWhen(tb testing.TB, target string) (addr string, open func()) {
	tb.Helper()
	// A free port, closed again: connections to it are refused until
	// the forwarder listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	opened := make(chan struct{})
	stop := make(chan struct{})
	done := make(chan struct{})
	tb.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		select {
		case <-stop:
			return
		case <-opened:
		}
		fwd, err := net.Listen("tcp", addr)
		if err != nil {
			tb.Errorf("forwarder at %s: %v", addr, err)
			return
		}
		go func() { <-stop; fwd.Close() }()
		for {
			c, err := fwd.Accept()
			if err != nil {
				return
			}
			go forward(c, target)
		}
	}()
	return addr, sync.OnceFunc(func() { close(opened) })
}

// forward copies c to and from a new connection to target.
func forward(c net.Conn, target string) {
	defer c.Close()
	d, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer d.Close()
	go func() { _, _ = io.Copy(d, c) }()
	_, _ = io.Copy(c, d)
}
