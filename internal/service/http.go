package service

import (
	"cmp"
	"errors"
	"net/http"
	"time"
)

// Defaults of the HTTP servers' limits (HTTPLimits).
const (
	DefaultHTTPReadHeaderTimeout = 10 * time.Second
	DefaultHTTPReadTimeout       = 30 * time.Second
	DefaultHTTPWriteTimeout      = 60 * time.Second
	DefaultHTTPIdleTimeout       = 60 * time.Second
	DefaultHTTPMaxHeaderBytes    = 64 << 10
	// DefaultHTTPMaxConnections bounds the connections a server holds
	// open (each costs about 20 KiB idle), and
	// DefaultHTTPMaxConnectionsPerAddress those from one remote IP.
	DefaultHTTPMaxConnections           = 2048
	DefaultHTTPMaxConnectionsPerAddress = 512
)

// HTTPLimits bound what one connection may hold of a service's HTTP
// server: how long a client may take to send a request's headers and its
// whole request (ReadTimeout: a declared body that never comes is cut
// off then), how long answering it may take from the end of its headers
// (WriteTimeout: a client that stops reading its answer is cut off
// then), how long a keep-alive connection may wait for its next request,
// the size of the request headers, and how many connections it holds open,
// in all and from one remote IP address (beyond either a connection is
// answered 429 and closed before anything of it is read). Every service
// (writer, projector, auditor) serves with them; the zero HTTPLimits are
// the defaults.
type HTTPLimits struct {
	ReadHeaderTimeout        time.Duration
	ReadTimeout              time.Duration
	WriteTimeout             time.Duration
	IdleTimeout              time.Duration
	MaxHeaderBytes           int
	MaxConnections           int
	MaxConnectionsPerAddress int
}

// DefaultHTTPLimits returns the default limits.
func DefaultHTTPLimits() HTTPLimits {
	return HTTPLimits{
		ReadHeaderTimeout: DefaultHTTPReadHeaderTimeout,
		ReadTimeout:       DefaultHTTPReadTimeout,
		WriteTimeout:      DefaultHTTPWriteTimeout,
		IdleTimeout:       DefaultHTTPIdleTimeout,
		MaxHeaderBytes:    DefaultHTTPMaxHeaderBytes,

		MaxConnections:           DefaultHTTPMaxConnections,
		MaxConnectionsPerAddress: DefaultHTTPMaxConnectionsPerAddress,
	}
}

// Bind defines the -http-* limit flags on f, bound to ESKV_HTTP_*
// variables, with l's values (the defaults when zero) as defaults.
func (l *HTTPLimits) Bind(f *Flags) {
	*l = l.orDefaults()
	f.DurationVar(&l.ReadHeaderTimeout, "http-read-header-timeout", l.ReadHeaderTimeout, "longest time a client may take to send a request's headers")
	f.DurationVar(&l.ReadTimeout, "http-read-timeout", l.ReadTimeout, "longest time a client may take to send a whole request, body included; then the connection is closed")
	f.DurationVar(&l.WriteTimeout, "http-write-timeout", l.WriteTimeout, "longest time from the end of a request's headers to the end of its answer; a client that stops reading is cut off then")
	f.DurationVar(&l.IdleTimeout, "http-idle-timeout", l.IdleTimeout, "how long a keep-alive connection may wait for its next request")
	f.IntVar(&l.MaxHeaderBytes, "http-max-header-bytes", l.MaxHeaderBytes, "largest request headers accepted, in bytes (431 beyond)")
	f.IntVar(&l.MaxConnections, "http-max-connections", l.MaxConnections, "connections the HTTP server holds open at once; beyond it a new one is answered 429 and closed")
	f.IntVar(&l.MaxConnectionsPerAddress, "http-max-connections-per-address", l.MaxConnectionsPerAddress,
		"connections the HTTP server holds open from one remote IP address (behind a proxy, every client shares the proxy's); beyond it a new one is answered 429 and closed")
}

// Check returns an error naming each limit flag of f that is not
// positive (Bind must have defined them).
func (l *HTTPLimits) Check(f *Flags) error {
	return errors.Join(
		f.Check(l.ReadHeaderTimeout > 0, "http-read-header-timeout", "must be a positive duration"),
		f.Check(l.ReadTimeout > 0, "http-read-timeout", "must be a positive duration"),
		f.Check(l.WriteTimeout > 0, "http-write-timeout", "must be a positive duration"),
		f.Check(l.IdleTimeout > 0, "http-idle-timeout", "must be a positive duration"),
		f.Positive("http-max-header-bytes", "http-max-connections", "http-max-connections-per-address"),
	)
}

// orDefaults returns l with each zero limit replaced by its default.
func (l HTTPLimits) orDefaults() HTTPLimits {
	d := DefaultHTTPLimits()
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = d.ReadHeaderTimeout
	}
	if l.ReadTimeout == 0 {
		l.ReadTimeout = d.ReadTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = d.WriteTimeout
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = d.IdleTimeout
	}
	if l.MaxHeaderBytes == 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	l.MaxConnections = cmp.Or(l.MaxConnections, d.MaxConnections)
	l.MaxConnectionsPerAddress = cmp.Or(l.MaxConnectionsPerAddress, d.MaxConnectionsPerAddress)
	return l
}

// Apply sets l (the defaults where zero) on hs.
func (l HTTPLimits) Apply(hs *http.Server) {
	l = l.orDefaults()
	hs.ReadHeaderTimeout = min(l.ReadHeaderTimeout, l.ReadTimeout)
	hs.ReadTimeout = l.ReadTimeout
	hs.WriteTimeout = l.WriteTimeout
	hs.IdleTimeout = l.IdleTimeout
	hs.MaxHeaderBytes = l.MaxHeaderBytes
}

// Server returns an HTTP server of h with limits l.
func (l HTTPLimits) Server(h http.Handler) *http.Server {
	hs := &http.Server{Handler: h}
	l.Apply(hs)
	return hs
}
