// Command projector folds kv.changes into the Postgres projection
// (kv_entries, kv_history, projector_offsets), exactly once, and serves
// /healthz, /readyz and /metrics.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal stops gracefully; a second one exits at once.
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "projector:", err)
		os.Exit(1)
	}
}

// config is the projector's configuration; every field is a flag whose
// default comes from an ESKV_ environment variable.
type config struct {
	addr        string
	addrFile    string
	brokers     string
	postgresURL string
	topic       string
	partitions  int
	logLevel    string
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var c config
	fs := flag.NewFlagSet("projector", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.addr, "addr", env("ESKV_PROJECTOR_ADDR", "127.0.0.1:8081"), "listen address of /healthz, /readyz and /metrics (ESKV_PROJECTOR_ADDR)")
	fs.StringVar(&c.addrFile, "addr-file", env("ESKV_PROJECTOR_ADDR_FILE", ""), "write the bound address to this file once listening (ESKV_PROJECTOR_ADDR_FILE)")
	fs.StringVar(&c.brokers, "brokers", env("ESKV_BROKERS", "127.0.0.1:19092"), "Kafka seed brokers, comma-separated (ESKV_BROKERS)")
	fs.StringVar(&c.postgresURL, "postgres-url", env("ESKV_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/eskv?sslmode=disable"), "Postgres URL of the projection (ESKV_POSTGRES_URL)")
	fs.StringVar(&c.topic, "topic", env("ESKV_TOPIC", changelog.DefaultChangesTopic), "changes topic (ESKV_TOPIC)")
	partitions := env("ESKV_PARTITIONS", strconv.Itoa(changelog.DefaultPartitions))
	fs.StringVar(&partitions, "partitions", partitions, "partition count the changes topic must have (ESKV_PARTITIONS)")
	fs.StringVar(&c.logLevel, "log-level", env("ESKV_LOG_LEVEL", "info"), "debug, info, warn or error (ESKV_LOG_LEVEL)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	n, err := strconv.Atoi(partitions)
	if err != nil || n < 1 {
		return c, fmt.Errorf("partitions must be a positive integer, got %q", partitions)
	}
	c.partitions = n
	return c, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	c, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("log-level: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})).With("service", "projector")

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
		Brokers:    strings.Split(c.brokers, ","),
		Topic:      c.topic,
		Partitions: int32(c.partitions),
	}, projection.New(pool), log, reg)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	hs := &http.Server{Handler: handler(pool, reg), ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	if c.addrFile != "" {
		if err := os.WriteFile(c.addrFile, []byte(ln.Addr().String()), 0o644); err != nil {
			ln.Close()
			return err
		}
	}

	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	perr := make(chan error, 1)
	go func() { perr <- p.Run(pctx) }()
	herr := make(chan error, 1)
	go func() { herr <- hs.Serve(ln) }()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-perr:
		perr = nil
		if runErr == nil {
			runErr = errors.New("projector stopped unexpectedly")
		}
	case runErr = <-herr:
		herr = nil
	}
	// Leave the group (a batch in flight commits or rolls back), then stop
	// serving.
	pcancel()
	if perr != nil {
		if err := <-perr; err != nil && runErr == nil {
			runErr = err
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	log.Info("stopped")
	return nil
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
