package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
)

// get answers GET url's status, body and whether the server closes the
// connection after it.
func get(t *testing.T, url string) (int, string, bool) {
	t.Helper()
	r, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return r.StatusCode, string(b), r.Close
}

// TestStarting: while a service starts, its listener answers /healthz
// 200 and any other request, /readyz included, 503 partition_unavailable
// as JSON with Retry-After, each closing its connection; the address file
// is written at once. Stopped, it hands the listener over to Serve,
// whose handler then answers, the connection a client holds open
// without a request (a slow client) not delaying the handover.
func TestStarting(t *testing.T) {
	ln, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addrFile := filepath.Join(t.TempDir(), "addr")
	log := slog.New(slog.DiscardHandler)
	stop := Starting(log, HTTP{Listener: ln, AddrFile: addrFile})
	defer stop()
	base := "http://" + ln.Addr().String()
	if b, err := os.ReadFile(addrFile); err != nil || string(b) != ln.Addr().String() {
		t.Fatalf("address file: %q %v", b, err)
	}
	if code, body, closed := get(t, base+"/healthz"); code != 200 || body != `{"status":"ok"}` || !closed {
		t.Errorf("/healthz: %d %q closed=%v", code, body, closed)
	}
	for _, r := range []*http.Request{
		httptest.NewRequest("GET", base+"/readyz", nil),
		httptest.NewRequest("POST", base+"/v1/kv/a", strings.NewReader(`{"value":1}`)),
		httptest.NewRequest("GET", base+"/metrics", nil),
	} {
		r.RequestURI = ""
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		var e contract.ErrorBody
		err = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 503 || e.Error.Code != contract.EUnavailable || e.Error.Message != "the service is starting; retry" ||
			resp.Header.Get("Retry-After") != "1" || !resp.Close {
			t.Errorf("%s %s: %d %+v %v Retry-After %q closed=%v", r.Method, r.URL.Path, resp.StatusCode, e, err, resp.Header.Get("Retry-After"), resp.Close)
		}
	}

	// A client that connected and sends nothing.
	slow, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	_, _ = slow.Write([]byte("GET /healthz HTTP/1.1\r\n"))
	time.Sleep(50 * time.Millisecond) // the server reads the first line

	handed := make(chan net.Listener, 1)
	go func() { handed <- stop() }()
	var rest net.Listener
	select {
	case rest = <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return")
	}
	if stop() != rest {
		t.Error("a second stop returned another listener")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "served") })
	go func() { done <- Serve(ctx, log, "test", HTTP{Listener: rest, Handler: served}) }()
	if code, body, _ := get(t, base+"/readyz"); code != 200 || body != "served" {
		t.Errorf("after the handover: %d %q", code, body)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// fakeListener accepts the connections sent on conns.
type fakeListener struct {
	net.Listener
	conns chan net.Conn
}

func (l fakeListener) Accept() (net.Conn, error) {
	c, ok := <-l.conns
	if !ok {
		return nil, net.ErrClosed
	}
	return c, nil
}

// TestHandoverKeepsTheConnection: a connection accepted while Starting's
// server stops is not its to serve: its Accept says closed, and the
// listener handed over returns that connection first, then its own.
func TestHandoverKeepsTheConnection(t *testing.T) {
	fl := fakeListener{conns: make(chan net.Conn, 2)}
	hl := &handover{Listener: fl}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c, d := net.Pipe()
	defer c.Close()
	defer d.Close()

	fl.conns <- a
	if got, err := hl.Accept(); got != a || err != nil {
		t.Fatalf("before stopping: %v %v", got, err)
	}
	hl.stopping.Store(true)
	fl.conns <- b
	if got, err := hl.Accept(); got != nil || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("stopping: %v %v, want net.ErrClosed", got, err)
	}
	if hl.Close() != nil {
		t.Fatal("Close")
	}
	rest := hl.rest()
	fl.conns <- c
	for i, want := range []net.Conn{b, c} {
		if got, err := rest.Accept(); got != want || err != nil {
			t.Errorf("accept %d: %v %v, want %v", i, got, err, want)
		}
	}
	// Without a kept connection, the listener itself.
	if (&handover{Listener: fl}).rest() != net.Listener(fl) {
		t.Error("rest without a kept connection")
	}
}
