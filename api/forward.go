package api

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/events"
)

// ForwardedHeader marks a request one writer forwarded to another; its
// value is the sender's advertise URL. A forwarded request is never
// forwarded again: if its receiver does not own the key either (ownership
// is moving), it answers 503 and the client retries; if the receiver is
// the sender (a forward loop), it answers 503 forward_loop.
const ForwardedHeader = "Eskv-Forwarded-By"

// forwarder proxies requests to the writer that owns the key's partition.
type forwarder struct {
	self    string
	mu      sync.Mutex
	proxies map[string]*httputil.ReverseProxy
}

func (f *forwarder) proxy(target string) (*httputil.ReverseProxy, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.proxies[target]; ok {
		return p, nil
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	p := httputil.NewSingleHostReverseProxy(u)
	p.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":{"code":"partition_unavailable","message":"the writer owning this key did not answer; retry","retryAfterSeconds":1}}`))
	}
	f.proxies[target] = p
	return p, nil
}

// forward answers the request through the key's owner when another writer
// owns it. It reports whether it did. The request carries our advertise
// URL in ForwardedHeader, so the writer receiving it refuses to forward it
// again and recognizes its own forward coming back (writer.Route).
func (s *Server) forward(c echo.Context, k events.Key) (bool, error) {
	local, owner, err := s.w.Route(k, c.Request().Header.Get(ForwardedHeader))
	if local {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	p, err := s.fwd.proxy(owner)
	if err != nil {
		return true, events.Errorf(events.EInternal, "owner address %q: %v", owner, err)
	}
	c.Request().Header.Set(ForwardedHeader, s.fwd.self)
	p.ServeHTTP(c.Response(), c.Request())
	return true, nil
}
