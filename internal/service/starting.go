package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eskv/eskv/contract"
)

// startingDrain bounds how long Starting's server answers the requests
// in flight once the service is ready to serve: each is answered at once,
// so only a client that sends its request slowly is still there, and it
// is cut off.
const startingDrain = time.Second

// Starting answers on h's listener while the service opens what it
// needs before it can serve (its database, ClickHouse: Retry, which may
// wait as long as a partition lasts): GET /healthz 200 (the process is
// up: a liveness or startup probe does not restart it for a dependency's
// outage), and every other request, /readyz included, 503
// partition_unavailable with Retry-After (startingHandler), each on a
// connection closed after the answer. Without it the listener is open
// but nothing accepts: a client that dials the service directly waits
// until its own deadline. It writes h.AddrFile (the address, not a sign
// of readiness: /readyz is), h.Limits bound its connections, h.TLS
// serves HTTPS. The returned function stops it (at once, or after the requests
// in flight for at most startingDrain) and returns the listener, which
// Serve then serves; it may be called more than once (defer it for the
// paths that return before Serve). A listener that cannot be woken from
// Accept (SetDeadline) is returned as it is, without an answer meanwhile.
func Starting(log *slog.Logger, h HTTP) (stop func() net.Listener) {
	d, ok := h.Listener.(interface{ SetDeadline(time.Time) error })
	if !ok {
		return func() net.Listener { return h.Listener }
	}
	if h.AddrFile != "" {
		if err := os.WriteFile(h.AddrFile, []byte(h.Listener.Addr().String()), 0o644); err != nil {
			log.Warn("the address file", "err", err)
		}
	}
	hl := &handover{Listener: h.Listener}
	hs := h.Limits.Server(startingHandler())
	hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelInfo)
	// Its refusals are counted nowhere: the registry's counter is Serve's.
	ln := limitConns(hl, h.Limits, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if h.TLS != nil {
			hs.TLSConfig = h.TLS
			_ = hs.ServeTLS(ln, "", "")
			return
		}
		_ = hs.Serve(ln)
	}()
	var once sync.Once
	var rest net.Listener
	return func() net.Listener {
		once.Do(func() {
			// Wake the server's Accept; it returns net.ErrClosed from now
			// on, and a connection it accepted meanwhile is kept for Serve.
			hl.stopping.Store(true)
			_ = d.SetDeadline(time.Unix(1, 0))
			<-done
			_ = d.SetDeadline(time.Time{})
			ctx, cancel := context.WithTimeout(context.Background(), startingDrain)
			defer cancel()
			if hs.Shutdown(ctx) != nil {
				_ = hs.Close()
			}
			rest = hl.rest()
		})
		return rest
	}
}

// startingHandler answers every request while the service starts
// (Starting), as the writer's API answers: JSON, /healthz {"status":"ok"}
// and everything else 503 partition_unavailable (a code every client
// retries), /readyz included.
func startingHandler() http.Handler {
	body, _ := json.Marshal(contract.ErrorBody{Error: contract.ErrorDetail{Code: contract.EUnavailable, RetryAfterSeconds: 1,
		Message: "the service is starting; retry"}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && r.URL.Path == "/healthz" {
			_, _ = io.WriteString(w, `{"status":"ok"}`)
			return
		}
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write(body)
	})
}

// handover is a listener whose Accept can be stopped without closing it
// (Starting): once stopping, Accept returns net.ErrClosed, and a
// connection accepted meanwhile is kept for whoever serves the listener
// next (rest). Close does nothing: the listener is not its to close.
type handover struct {
	net.Listener
	stopping atomic.Bool
	mu       sync.Mutex
	kept     net.Conn
}

func (l *handover) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if !l.stopping.Load() {
		return c, err
	}
	if err == nil {
		l.mu.Lock()
		l.kept = c
		l.mu.Unlock()
	}
	return nil, net.ErrClosed
}

func (l *handover) Close() error { return nil }

// rest is the listener to serve after Starting: the connection accepted
// while it stopped first, if any.
func (l *handover) rest() net.Listener {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kept == nil {
		return l.Listener
	}
	return &firstConn{Listener: l.Listener, first: l.kept}
}

// firstConn is a listener whose Accept returns first, once, before the
// listener's own connections.
type firstConn struct {
	net.Listener
	once  sync.Once
	first net.Conn
}

func (l *firstConn) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.first })
	if c != nil {
		return c, nil
	}
	return l.Listener.Accept()
}
