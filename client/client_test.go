package client_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

const scope = "tenant/acme/project/demo/"

// testToken is the bearer token of the in-memory fakes: they accept any.
const testToken = "dev-token-0123456789abcdef"

func TestNetworkError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	c := client.New("http://"+addr, testToken, client.WithRetries(2, time.Millisecond, time.Millisecond))
	_, err = c.Get(t.Context(), scope+"x")
	var ne *client.NetworkError
	if !errors.As(err, &ne) || ne.Method != "GET" || ne.URL != "http://"+addr+"/v1/kv/"+scope+"x" {
		t.Fatalf("want a NetworkError, got %#v", err)
	}
	var e *contract.Error
	if errors.As(err, &e) {
		t.Fatalf("a network error must not look like an answer: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := client.New("http://"+addr, testToken).Get(ctx, scope+"x"); !errors.Is(err, context.Canceled) || !errors.As(err, &ne) {
		t.Fatalf("cancelled ctx: want a NetworkError wrapping context.Canceled, got %v", err)
	}
}

func TestNotEskvIsNotNotFound(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<html>no such page</html>", http.StatusNotFound)
	}))
	defer hs.Close()
	_, err := client.New(hs.URL, testToken).Get(t.Context(), scope+"x")
	if code := contract.ErrorCode(err); code != contract.EInternal || !errors.Is(err, client.ErrUnexpectedAnswer) {
		t.Fatalf("a foreign 404 must not read as not_found: got %s (%v)", code, err)
	}
}

// TestTxnRetriedOnlyWithRequestID: a transaction is retried on 503 only
// when it carries a requestId (the server then answers a repeat as a
// replay instead of applying it twice).
func TestTxnRetriedOnlyWithRequestID(t *testing.T) {
	for _, tc := range []struct {
		name      string
		requestID string
		attempts  int
	}{{"OKRetriedWithRequestID", "r", 2}, {"OKNotRetriedWithout", "", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n++
				w.Header().Set("Content-Type", "application/json")
				if n == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
					_, _ = w.Write([]byte(`{"error":{"code":"partition_unavailable","message":"moving"}}`))
					return
				}
				_, _ = w.Write([]byte(`{"txnId":"t","results":[{"key":"k","version":1}]}`))
			}))
			defer srv.Close()
			c := client.New(srv.URL, "tok", client.WithRetries(3, time.Millisecond, time.Millisecond))
			_, err := c.Txn(t.Context(), contract.TxnBody{RequestID: tc.requestID, Ops: []contract.TxnOp{{Op: contract.OpDelete, Key: scope + "k"}}})
			if n != tc.attempts || (tc.attempts == 1) != (contract.ErrorCode(err) == contract.EUnavailable) {
				t.Fatalf("%d attempts (want %d), err %v", n, tc.attempts, err)
			}
		})
	}
}

// TestConcurrentCallsReuseConnections: a Client shared by 16 goroutines
// keeps a connection per call in flight and reuses them; with
// http.DefaultTransport's 2 idle connections a host, every call beyond
// the second in flight dialled a connection and closed it afterwards.
func TestConcurrentCallsReuseConnections(t *testing.T) {
	var dialled atomic.Int64
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond) // the calls overlap
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no such key"}}`))
	}))
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	hs.Start()
	defer hs.Close()
	c := client.New(hs.URL, testToken)
	const goroutines, calls = 16, 100
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				if _, err := c.Get(t.Context(), scope+"x"); contract.ErrorCode(err) != contract.ENotFound {
					t.Errorf("get: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := dialled.Load(); n > 2*goroutines {
		t.Fatalf("%d connections for %d calls of %d goroutines; want at most two a goroutine", n, goroutines*calls, goroutines)
	}
}

// TestLargeBodyRefusedBeforeItIsSent: a write whose body is over 1 MiB
// asks first (Expect: 100-continue), so a server that refuses it from
// its headers (as the writer does a body declaring more than its limit)
// answers before any of the body is sent. The server here answers 413 at
// the headers and then reads whatever else arrives, to count it: without
// the header, the client sends the body straight after them.
func TestLargeBodyRefusedBeforeItIsSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sent := make(chan int64, 1)
	go func() {
		conn, err := l.Accept()
		if err != nil {
			sent <- -1
			return
		}
		defer conn.Close()
		br := bufio.NewReader(conn)
		if _, err := http.ReadRequest(br); err != nil {
			sent <- -1
			return
		}
		body := `{"error":{"code":"value_too_large","message":"too big","field":"value"}}`
		fmt.Fprintf(conn, "HTTP/1.1 413 Request Entity Too Large\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
		_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := io.Copy(io.Discard, br)
		sent <- n
	}()
	v := bytes.Repeat([]byte("x"), 6<<20)
	v[0], v[len(v)-1] = '"', '"'
	_, err = client.New("http://"+l.Addr().String(), testToken, client.WithRetries(1, time.Millisecond, time.Millisecond)).
		Put(t.Context(), client.PutRequest{Key: scope + "big", Value: v})
	if code := contract.ErrorCode(err); code != contract.ETooLarge {
		t.Fatalf("want value_too_large, got %s (%v)", code, err)
	}
	if n := <-sent; n != 0 {
		t.Fatalf("%d bytes of the body reached the server after its headers, want 0", n)
	}
}
