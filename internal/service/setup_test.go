package service_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/testenv"
)

// TestOpenProjectionWaitsForTheDatabase: a service started while its
// database does not answer (nothing listens at the URL's address yet)
// logs that it tries again and opens the projection once the database
// answers, instead of failing at once (a writer restarted into a network
// cut from Postgres exited ten times in ten seconds under make chaos).
func TestOpenProjectionWaitsForTheDatabase(t *testing.T) {
	t.Parallel()
	pg := testenv.MustPostgresDB(t)
	real, err := url.Parse(pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	// A free port, closed again: connections to it are refused until the
	// forwarder below listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	via := *real
	via.Host = addr

	var logs testenv.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		time.Sleep(time.Second)
		fwd, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("forwarder: %v", err)
			return
		}
		t.Cleanup(func() { fwd.Close() })
		for {
			c, err := fwd.Accept()
			if err != nil {
				return
			}
			go forward(c, real.Host)
		}
	}()
	pool, err := (&service.Postgres{URL: via.String()}).OpenProjection(ctx, nil, log)
	if err != nil {
		t.Fatalf("OpenProjection while the database came up a second later: %v", err)
	}
	pool.Close()
	if !strings.Contains(logs.String(), "the projection database does not answer; trying again") {
		t.Errorf("no warning while it waited; logs:\n%s", logs.String())
	}
}

// forward copies c to and from a new connection to addr.
func forward(c net.Conn, addr string) {
	defer c.Close()
	d, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer d.Close()
	go func() { _, _ = io.Copy(d, c) }()
	_, _ = io.Copy(c, d)
}
