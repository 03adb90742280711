package service

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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
			"ESKV_HTTP_IDLE_TIMEOUT": "9s", "ESKV_HTTP_MAX_HEADER_BYTES": "2048", SettingMaxConnectionsPerAddress: "64"},
			want: HTTPLimits{ReadHeaderTimeout: DefaultHTTPReadHeaderTimeout, ReadTimeout: 5 * time.Second,
				WriteTimeout: 7 * time.Second, IdleTimeout: 9 * time.Second, MaxHeaderBytes: 2048,
				MaxConnections: DefaultHTTPMaxConnections, MaxConnectionsPerAddress: 64}},
		{name: "ErrZeroTimeout", env: map[string]string{"ESKV_HTTP_WRITE_TIMEOUT": "0s"},
			wantErr: "-http-write-timeout (ESKV_HTTP_WRITE_TIMEOUT) must be a positive duration, got 0s"},
		{name: "ErrMaxHeaderBytes", env: map[string]string{"ESKV_HTTP_MAX_HEADER_BYTES": "-1"},
			wantErr: "-http-max-header-bytes (ESKV_HTTP_MAX_HEADER_BYTES) must be at least 1, got -1"},
		{name: "ErrMaxConnections", env: map[string]string{SettingMaxConnections: "0"},
			wantErr: "-http-max-connections (ESKV_HTTP_MAX_CONNECTIONS) must be at least 1, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []string{"ESKV_HTTP_READ_HEADER_TIMEOUT", "ESKV_HTTP_READ_TIMEOUT", "ESKV_HTTP_WRITE_TIMEOUT",
				"ESKV_HTTP_IDLE_TIMEOUT", "ESKV_HTTP_MAX_HEADER_BYTES", SettingMaxConnections, SettingMaxConnectionsPerAddress} {
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

// dialFrom opens a connection to addr from the loopback address local
// (127.0.0.x: each is a remote address of its own to the server).
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// answerOf sends a GET of /ok on conn and returns the status line of the
// answer ("" when the connection closes without one).
func answerOf(conn net.Conn) string {
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(conn, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
	line, _ := bufio.NewReader(conn).ReadString('\n')
	return strings.TrimSpace(line)
}

// TestServeConnectionLimits: one remote address holds at most its share
// of the connections (the next is answered 429 naming the setting and
// closed), other addresses still connect until the total is reached, and
// a closed connection frees its slot.
func TestServeConnectionLimits(t *testing.T) {
	h := http.NewServeMux()
	h.HandleFunc("GET /ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	addr := serveLimited(t, HTTPLimits{MaxConnections: 3, MaxConnectionsPerAddress: 2}, h)
	first := dialFrom(t, "127.0.0.1", addr)
	if got := answerOf(first); got != "HTTP/1.1 200 OK" {
		t.Fatalf("first connection: %q, want 200", got)
	}
	dialFrom(t, "127.0.0.1", addr)
	refused := func(local, setting string) {
		t.Helper()
		conn := dialFrom(t, local, addr)
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		got, _ := io.ReadAll(conn)
		if !strings.HasPrefix(string(got), "HTTP/1.1 429") || !strings.Contains(string(got), `"field":"`+setting+`"`) ||
			!strings.Contains(string(got), "Retry-After: 1") {
			t.Fatalf("connection from %s beyond %s: %q, want 429 naming it", local, setting, got)
		}
	}
	refused("127.0.0.1", SettingMaxConnectionsPerAddress)
	if got := answerOf(dialFrom(t, "127.0.0.2", addr)); got != "HTTP/1.1 200 OK" {
		t.Fatalf("another address's connection: %q, want 200", got)
	}
	refused("127.0.0.3", SettingMaxConnections)
	first.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(5 * time.Second); ; <-tick.C {
		conn := dialFrom(t, "127.0.0.1", addr)
		got := answerOf(conn)
		if got == "HTTP/1.1 200 OK" {
			break
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatalf("connection after one closed: %q, want 200", got)
		}
	}
}

// slowBodyAnswer sends, on a new connection from local, a PUT declaring a
// body of 60 KiB: 1 KiB of it, then after a pause longer than net/http's
// wait before a close, the rest (as a client does that reads the answer
// only once it has sent the request); then it reads the answer. It returns the
// answer's status line, or the error that stood in its place.
func slowBodyAnswer(t *testing.T, local, addr string) string {
	t.Helper()
	conn := dialFrom(t, local, addr)
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	body := bytes.Repeat([]byte("x"), 60<<10)
	if _, err := fmt.Fprintf(conn, "PUT /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", len(body)); err != nil {
		return "request: " + err.Error()
	}
	if _, err := conn.Write(body[:1024]); err != nil {
		return "body: " + err.Error()
	}
	// The rest in two parts: a reset that answers the first fails the
	// second, as it fails an HTTP client's write of the body.
	time.Sleep(800 * time.Millisecond)
	for _, part := range [][]byte{body[1024:2048], body[2048:]} {
		if _, err := conn.Write(part); err != nil {
			return "body: " + err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "answer: " + err.Error()
	}
	resp.Body.Close()
	return resp.Status
}

// TestServeLingersOverUnreadBody: a connection closed after an answer
// given before its request's body was read (what the API does when it
// refuses a request: Connection: close, no more reading) keeps reading
// and discarding that body for a while before it closes, as does a
// connection refused over the connection limits; a client still sending
// its body then reads its answer instead of a reset (RFC 9112 9.6). Each
// used to be closed with the body unread: the rest of the body met a
// closed socket, and the client got "broken pipe" in place of its 429.
func TestServeLingersOverUnreadBody(t *testing.T) {
	h := http.NewServeMux()
	h.HandleFunc("GET /ok", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	h.HandleFunc("PUT /refuse", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		http.Error(w, "refused", http.StatusTooManyRequests)
	})
	addr := serveLimited(t, HTTPLimits{MaxConnections: 10, MaxConnectionsPerAddress: 1}, h)
	if got := slowBodyAnswer(t, "127.0.0.1", addr); got != "429 Too Many Requests" {
		t.Fatalf("a request refused before its body was read: %q, want its 429", got)
	}
	held := dialFrom(t, "127.0.0.2", addr)
	if got := answerOf(held); got != "HTTP/1.1 200 OK" {
		t.Fatalf("first connection of 127.0.0.2: %q, want 200", got)
	}
	if got := slowBodyAnswer(t, "127.0.0.2", addr); got != "429 Too Many Requests" {
		t.Fatalf("a connection beyond the address's limit: %q, want its 429", got)
	}
}
