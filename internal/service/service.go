// Package service is what eskv's commands (writer, projector, auditor,
// devbroker) share around their own work: one main (Main: signals, exit
// codes), configuration as flags whose defaults come from ESKV_ variables
// (Flags, Kafka, Postgres, LogLevel), one metrics registry, the /healthz,
// /readyz and /metrics endpoints, and one lifecycle (Serve): listen, serve
// HTTP next to the long-running parts, stop in order.
package service

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"golang.org/x/sync/errgroup"

	"github.com/eskv/eskv/internal/admission"
	"github.com/eskv/eskv/internal/buildinfo"
)

// ShutdownTimeout bounds how long the HTTP server answers the requests
// in flight once the service stops.
const ShutdownTimeout = 15 * time.Second

// Listen listens on addr (":0" picks a free port); Serve reports the
// bound address.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	return ln, nil
}

// HTTP is the HTTP side of a service.
type HTTP struct {
	Listener net.Listener
	AddrFile string       // when set, the bound address is written here, for tools that start the service on port 0
	Handler  http.Handler // the API, or Handler's endpoints
	Limits   HTTPLimits   // timeouts, header size and connections; the defaults where zero
	// Registerer counts the connections refused beyond Limits
	// (eskv_http_limited_total); nil counts nothing.
	Registerer prometheus.Registerer
	// TLS, when set, serves HTTPS (HTTP/2 and HTTP/1.1) with it instead
	// of plain HTTP (CertReloader.ServerConfig).
	TLS *tls.Config
}

// Serve reports the bound address (log, AddrFile), serves h.Handler and
// runs parts next to it until ctx ends or any of them returns. Then it
// stops in order: the HTTP server stops taking requests and answers those
// in flight (ShutdownTimeout), then the parts are cancelled (they leave
// their consumer groups; a batch in flight finishes or rolls back) and
// awaited. A part returning before the service stops is an error: each is
// meant to run until stopped. Serve closes the listener.
func Serve(ctx context.Context, log *slog.Logger, name string, h HTTP, parts ...func(context.Context) error) error {
	addr := h.Listener.Addr().String()
	log.Info("listening", "addr", addr, "tls", h.TLS != nil)
	if h.AddrFile != "" {
		if err := os.WriteFile(h.AddrFile, []byte(addr), 0o644); err != nil {
			h.Listener.Close()
			return err
		}
	}
	hs := h.Limits.Server(h.Handler)
	// The server's own complaints (a failed TLS handshake: a client that
	// does not trust the certificate, a scanner) go to the service's log,
	// structured, instead of the standard logger's stderr.
	hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelInfo)
	refusals, err := admission.Refusals(h.Registerer)
	if err != nil {
		h.Listener.Close()
		return err
	}
	ln := limitConns(h.Listener, h.Limits, refusals)
	// The parts outlive ctx until the HTTP server is drained; g's context
	// ends when one of them fails.
	g, gctx := errgroup.WithContext(context.WithoutCancel(ctx))
	pctx, stopParts := context.WithCancel(gctx)
	defer stopParts()
	for _, part := range parts {
		g.Go(func() error {
			err := part(pctx)
			if err == nil && pctx.Err() == nil {
				err = errors.New(name + " stopped unexpectedly")
			}
			return err
		})
	}
	g.Go(func() error {
		serve := hs.Serve
		if h.TLS != nil {
			hs.TLSConfig = h.TLS
			serve = func(ln net.Listener) error { return hs.ServeTLS(ln, "", "") }
		}
		if err := serve(ln); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		select {
		case <-ctx.Done():
		case <-gctx.Done():
		}
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := hs.Shutdown(sctx); err != nil {
			log.Warn("http shutdown", "err", err)
		}
		stopParts()
		return nil
	})
	if err := g.Wait(); err != nil {
		return err
	}
	log.Info("stopped")
	return nil
}

// NewRegistry returns a metrics registry holding the Go runtime's and
// the process's collectors and eskv_build_info of the running binary
// (buildinfo.Get).
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo(buildinfo.Get()))
	return reg
}

// ReadyTimeout bounds the readiness check of /readyz (Handler), so that
// it answers within 2 s however its dependencies do.
const ReadyTimeout = 1500 * time.Millisecond

// Handler serves /healthz (the process is up), /readyz (ready returns
// nil within ReadyTimeout; else 503 with its error, which is answered as
// it is: ready must return a stable message, never a driver's error,
// which names hosts, users and databases) and /metrics from reg
// (MetricsHandler: with metricsToken, only to requests bearing it).
func Handler(reg *prometheus.Registry, ready func(context.Context) error, metricsToken string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
		defer cancel()
		if err := ready(ctx); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", MetricsHandler(reg, metricsToken))
	return mux
}
