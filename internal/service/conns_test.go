package service

import (
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// countingConn counts what is read through it.
type countingConn struct {
	*net.TCPConn
	read *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

// TestLingerBoundedPerAddress: connections of one remote address that
// are closed while their client keeps sending (a body refused from its
// headers, again and again) read, in all, at most that address's share
// (lingerBurst, and lingerRate a second after it), not lingerBytes each;
// another address still has its own share. Before the share, each of the
// 24 connections below read 1 MiB: 24 MiB, where the share allows 8 and a
// little more.
func TestLingerBoundedPerAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	l := &limitedListener{Listener: ln}
	// flood connects and sends until the connection fails; linger reads
	// the server's side as from addr and returns what it read.
	flood := func(addr string) int64 {
		t.Helper()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		go func() {
			buf := make([]byte, 64<<10)
			for {
				if _, err := client.Write(buf); err != nil {
					return
				}
			}
		}()
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		var read atomic.Int64
		if err := l.linger(countingConn{server.(*net.TCPConn), &read}, addr); err != nil {
			t.Fatal(err)
		}
		return read.Load()
	}
	start := time.Now()
	var total int64
	for range 24 {
		n := flood("192.0.2.1")
		if n > lingerBytes {
			t.Fatalf("one lingering connection read %d bytes, want at most %d", n, lingerBytes)
		}
		total += n
	}
	allowed := lingerBurst + int64(time.Since(start).Seconds()*lingerRate) + 64<<10
	if total > allowed {
		t.Fatalf("24 lingering connections of one address read %d bytes in %s, want at most %d (its share)",
			total, time.Since(start).Round(time.Millisecond), allowed)
	}
	if n := flood("192.0.2.2"); n < lingerBytes/2 {
		t.Fatalf("another address's lingering connection read %d bytes: its share was taken by the first", n)
	}
}

// TestLingerBudgetsShare: an address's grants come out of its share,
// what a grant did not use comes back, and the budgets keep at most
// maxLingerAddrs addresses: when every one of them is still reading, a
// new address gets no share, and an address whose bucket filled again
// makes room.
func TestLingerBudgetsShare(t *testing.T) {
	var b lingerBudgets
	if g := b.grant("a", 64<<10); g != 64<<10 {
		t.Fatalf("a first grant of 64 KiB: %d", g)
	}
	b.refund("a", 32<<10)
	if g := b.grant("a", 2*lingerBurst); g < lingerBurst-32<<10 || g > lingerBurst-32<<10+64<<10 {
		t.Fatalf("the rest of the share after 32 KiB read: %d, want about %d", g, lingerBurst-32<<10)
	}
	if g := b.grant("a", 64<<10); g > 64<<10/8 {
		t.Fatalf("a drained share granted %d bytes at once", g)
	}
	for i := 1; i < maxLingerAddrs; i++ {
		if g := b.grant("a"+strconv.Itoa(i), lingerBurst); g != lingerBurst {
			t.Fatalf("address %d: granted %d, want its whole share", i, g)
		}
	}
	if g := b.grant("new", 1<<10); g != 0 {
		t.Fatalf("a new address was granted %d bytes while every kept address was still reading", g)
	}
	b.refund("a1", lingerBurst) // full again, as a second later
	if g := b.grant("new", 1<<10); g != 1<<10 {
		t.Fatalf("a new address was granted %d bytes after a full share could be forgotten", g)
	}
	if len(b.of) > maxLingerAddrs {
		t.Fatalf("%d addresses kept, want at most %d", len(b.of), maxLingerAddrs)
	}
}
