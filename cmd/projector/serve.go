package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

// serve runs the projector until ctx ends: it migrates the projection,
// consumes kv.changes into it and serves /healthz, /readyz and /metrics.
func serve(ctx context.Context, args []string, e env, stderr io.Writer) error {
	var c config
	var addr, addrFile, checkInterval, instanceID string
	fs, check := newFlagSet("serve", &c, e, "info", stderr)
	fs.StringVar(&addr, "addr", e("ESKV_PROJECTOR_ADDR", "127.0.0.1:8081"), "listen address of /healthz, /readyz and /metrics (ESKV_PROJECTOR_ADDR)")
	fs.StringVar(&addrFile, "addr-file", e("ESKV_PROJECTOR_ADDR_FILE", ""), "write the bound address to this file once listening (ESKV_PROJECTOR_ADDR_FILE)")
	fs.StringVar(&checkInterval, "check-interval", e("ESKV_PROJECTOR_CHECK_INTERVAL", projector.DefaultCheckInterval.String()),
		"how often a running projector re-checks that the topic was not recreated, truncated or repartitioned (ESKV_PROJECTOR_CHECK_INTERVAL)")
	host, _ := os.Hostname()
	fs.StringVar(&instanceID, "instance-id", e("ESKV_PROJECTOR_ID", "projector-"+host),
		"static consumer-group member id: a restarted projector takes its partitions back at once; unique per projector (ESKV_PROJECTOR_ID)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := check(); err != nil {
		return err
	}
	every, err := time.ParseDuration(checkInterval)
	if err != nil || every <= 0 {
		return fmt.Errorf("check-interval must be a positive duration, got %q", checkInterval)
	}
	log, err := c.logger(stderr)
	if err != nil {
		return err
	}

	pool, err := pgxpool.New(ctx, c.postgresURL)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer pool.Close()
	if err := projection.Migrate(ctx, pool); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p, err := projector.New(projector.Config{
		Brokers:       c.brokerList(),
		Topic:         c.topic,
		Partitions:    int32(c.partitions),
		CheckInterval: every,
		InstanceID:    instanceID,
	}, projection.New(pool), log, reg)
	if err != nil {
		return err
	}

	return service.Serve(ctx, log, "projector", addr, addrFile, handler(pool, reg), p.Run)
}

// handler serves /healthz (the process is up), /readyz (Postgres answers)
// and /metrics.
func handler(pool *pgxpool.Pool, reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			http.Error(w, "postgres unavailable", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
