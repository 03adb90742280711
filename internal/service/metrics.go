package service

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eskv/eskv/contract"
)

// MetricsTokenEnv is the environment variable every service reads the
// token /metrics requires from; empty: /metrics answers whoever reaches
// it.
const MetricsTokenEnv = "ESKV_METRICS_TOKEN"

// BindMetricsToken defines -metrics-token (default from
// ESKV_METRICS_TOKEN) on f.
func BindMetricsToken(f *Flags, token *string) {
	f.StringVar(token, "metrics-token", "", "bearer token GET /metrics requires (Authorization: Bearer <token>; 401 without it); empty: /metrics answers whoever reaches it")
}

// MetricsHandler serves g's metrics; with a token, only to requests
// bearing it (Authorization: Bearer <token>), 401 unauthenticated to
// others, as the writer's API answers it.
func MetricsHandler(g prometheus.Gatherer, token string) http.Handler {
	var opts promhttp.HandlerOpts
	if reg, ok := g.(prometheus.Registerer); ok {
		opts.Registry = reg // counts the handler's own errors there
	}
	return RequireMetricsToken(promhttp.HandlerFor(g, opts), token)
}

// RequireMetricsToken serves h only to requests bearing token
// (Authorization: Bearer <token>), 401 unauthenticated to others, as
// /metrics answers them; an empty token serves h to anyone. The auditor
// protects GET /verification with it, as its /metrics.
func RequireMetricsToken(h http.Handler, token string) http.Handler {
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
		got := sha256.Sum256([]byte(strings.TrimLeft(tok, " ")))
		if !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="eskv-metrics"`)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_ = json.NewEncoder(w).Encode(contract.ErrorBody{Error: contract.ErrorDetail{Code: contract.EUnauthenticated, Field: "Authorization",
				Message: r.URL.Path + " needs the metrics token (" + MetricsTokenEnv + ") as a bearer token"}})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// ServeMetrics listens on addr and returns the part that serves h at GET
// /metrics there, with limits, until its context ends: metrics on an
// address of their own, apart from an API's. An empty addr returns nil:
// no part to run.
func ServeMetrics(addr string, limits HTTPLimits, h http.Handler, log *slog.Logger) (func(context.Context) error, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics %w", err)
	}
	log.Info("metrics listening", "addr", ln.Addr().String())
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	return servePart(limits.Server(mux), ln), nil
}
