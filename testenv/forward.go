package testenv

import (
	"io"
	"net"
	"testing"
	"time"
)

// ForwardLater returns a local address where connections are refused
// until after has passed, and then forwarded to target: a dependency
// that comes up after the service that needs it. The forwarder stops at
// the test's cleanup.
func ForwardLater(tb testing.TB, target string, after time.Duration) string {
	tb.Helper()
	// A free port, closed again: connections to it are refused until
	// the forwarder listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop := make(chan struct{})
	done := make(chan struct{})
	tb.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		select {
		case <-stop:
			return
		case <-time.After(after):
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
	return addr
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
