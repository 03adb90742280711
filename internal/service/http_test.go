package service

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// serveLimited serves h with limits until the test ends and returns its
// address.
func serveLimited(t *testing.T, limits HTTPLimits, h http.Handler) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, slog.New(slog.DiscardHandler), "test", HTTP{Listener: ln, Handler: h, Limits: limits})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// closedWithin sends req on a new connection, reads whatever comes back
// and reports how long the server took to close the connection; it fails
// the test when the server still holds it after max.
func closedWithin(t *testing.T, addr, req string, max time.Duration) (string, time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(start.Add(max))
	got, err := io.ReadAll(conn)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Fatalf("the server still holds the connection after %v (got %q)", max, got)
	}
	return string(got), time.Since(start)
}

// TestServeLimits: a request whose body never comes, an idle keep-alive
// connection and a client that stops reading its answer are each cut off
// within their timeout; headers beyond MaxHeaderBytes are refused.
func TestServeLimits(t *testing.T) {
	limits := HTTPLimits{ReadTimeout: 300 * time.Millisecond, WriteTimeout: 500 * time.Millisecond,
		IdleTimeout: 300 * time.Millisecond, MaxHeaderBytes: 4 << 10}
	writeErr := make(chan error, 1)
	h := http.NewServeMux()
	h.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Write(b)
	})
	h.HandleFunc("GET /ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	h.HandleFunc("GET /big", func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 1<<20)
		for range 1 << 10 { // 1 GiB: more than any socket buffer holds
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	})
	addr := serveLimited(t, limits, h)

	t.Run("OKUnsentBodyClosedWithinReadTimeout", func(t *testing.T) {
		_, took := closedWithin(t, addr, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", 5*time.Second)
		if took < limits.ReadTimeout/2 {
			t.Errorf("closed after %v, before the read timeout %v", took, limits.ReadTimeout)
		}
	})
	t.Run("OKIdleKeepAliveClosedWithinIdleTimeout", func(t *testing.T) {
		got, _ := closedWithin(t, addr, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", 5*time.Second)
		if !strings.HasPrefix(got, "HTTP/1.1 200") || !strings.HasSuffix(got, "ok") {
			t.Errorf("answer %q, want 200 ok", got)
		}
	})
	t.Run("OKStalledReaderCutOffWithinWriteTimeout", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case err := <-writeErr:
			if err == nil {
				t.Fatal("the handler wrote 1 GiB to a client that reads nothing")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the handler still writes to a stalled reader after 10 s")
		}
	})
	t.Run("ErrHeadersTooLarge", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, "GET /ok HTTP/1.1\r\nHost: x\r\nX-Big: "+strings.Repeat("a", 16<<10)+"\r\n\r\n")
		r, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("status %d, want 431", r.StatusCode)
		}
	})
}

func TestHTTPLimitsFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    HTTPLimits
		wantErr string
	}{
		{name: "OKDefaults", want: DefaultHTTPLimits()},
		{name: "OKEnv", env: map[string]string{"ESKV_HTTP_READ_TIMEOUT": "5s", "ESKV_HTTP_WRITE_TIMEOUT": "7s",
			"ESKV_HTTP_IDLE_TIMEOUT": "9s", "ESKV_HTTP_MAX_HEADER_BYTES": "2048"},
			want: HTTPLimits{ReadHeaderTimeout: DefaultHTTPReadHeaderTimeout, ReadTimeout: 5 * time.Second,
				WriteTimeout: 7 * time.Second, IdleTimeout: 9 * time.Second, MaxHeaderBytes: 2048}},
		{name: "ErrZeroTimeout", env: map[string]string{"ESKV_HTTP_WRITE_TIMEOUT": "0s"},
			wantErr: "-http-write-timeout (ESKV_HTTP_WRITE_TIMEOUT) must be a positive duration, got 0s"},
		{name: "ErrMaxHeaderBytes", env: map[string]string{"ESKV_HTTP_MAX_HEADER_BYTES": "-1"},
			wantErr: "-http-max-header-bytes (ESKV_HTTP_MAX_HEADER_BYTES) must be at least 1, got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"ESKV_HTTP_READ_HEADER_TIMEOUT", "ESKV_HTTP_READ_TIMEOUT", "ESKV_HTTP_WRITE_TIMEOUT",
				"ESKV_HTTP_IDLE_TIMEOUT", "ESKV_HTTP_MAX_HEADER_BYTES"} {
				t.Setenv(v, tc.env[v])
			}
			f := NewFlags("t", io.Discard)
			var l HTTPLimits
			l.Bind(f)
			err := f.Parse(nil)
			if err == nil {
				err = l.Check(f)
			}
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || l != tc.want {
				t.Fatalf("got %+v, %v; want %+v", l, err, tc.want)
			}
		})
	}
}
