// Command writer serves eskv's HTTP API and appends validated writes to
// kv.changes for the partitions it owns.
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
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/writer"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal exits at once.
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
}

// config is the writer's configuration; every field is a flag whose
// default comes from an ESKV_ environment variable.
type config struct {
	httpAddr      string
	brokers       string
	postgresURL   string
	topic         string
	conflicts     string
	partitions    int
	createTopics  bool
	devToken      string
	tokensFile    string
	maxValueBytes int
	instanceID    string
	logLevel      string
	readyFile     string
	pprofAddr     string
	advertiseURL  string
	sweepInterval time.Duration
	maxOverlay    int
}

func parse(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	envInt := func(name string, def int) int {
		n, err := strconv.Atoi(env(name, strconv.Itoa(def)))
		if err != nil {
			return def
		}
		return n
	}
	host, _ := os.Hostname()
	var c config
	fs := flag.NewFlagSet("writer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.httpAddr, "http-addr", env("ESKV_HTTP_ADDR", "127.0.0.1:8080"), "HTTP listen address (ESKV_HTTP_ADDR)")
	fs.StringVar(&c.brokers, "brokers", env("ESKV_BROKERS", "127.0.0.1:19092"), "Kafka seed brokers, comma-separated (ESKV_BROKERS)")
	fs.StringVar(&c.postgresURL, "postgres-url", env("ESKV_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/eskv?sslmode=disable"), "Postgres URL of the projection (ESKV_POSTGRES_URL)")
	fs.StringVar(&c.topic, "topic", env("ESKV_TOPIC", changelog.DefaultChangesTopic), "changes topic (ESKV_TOPIC)")
	fs.StringVar(&c.conflicts, "conflicts-topic", env("ESKV_CONFLICTS_TOPIC", changelog.DefaultConflictsTopic), "conflicts topic (ESKV_CONFLICTS_TOPIC)")
	fs.IntVar(&c.partitions, "partitions", envInt("ESKV_PARTITIONS", changelog.DefaultPartitions), "partition count of the changes topic; never change it once created (ESKV_PARTITIONS)")
	fs.BoolVar(&c.createTopics, "create-topics", env("ESKV_CREATE_TOPICS", "true") == "true", "create missing topics at start (ESKV_CREATE_TOPICS)")
	fs.StringVar(&c.devToken, "dev-token", env("ESKV_DEV_TOKEN", ""), "a bearer token with read and write rights on every tenant, for local use (ESKV_DEV_TOKEN)")
	fs.StringVar(&c.tokensFile, "tokens-file", env("ESKV_TOKENS_FILE", ""), "JSON file of bearer tokens and their grants (ESKV_TOKENS_FILE)")
	fs.IntVar(&c.maxValueBytes, "max-value-bytes", envInt("ESKV_MAX_VALUE_BYTES", events.DefaultMaxValueBytes), "largest serialized value accepted (ESKV_MAX_VALUE_BYTES)")
	fs.StringVar(&c.instanceID, "instance-id", env("ESKV_WRITER_ID", "writer-"+host), "static group member id; unique per writer (ESKV_WRITER_ID)")
	fs.StringVar(&c.logLevel, "log-level", env("ESKV_LOG_LEVEL", "info"), "debug, info, warn or error (ESKV_LOG_LEVEL)")
	fs.StringVar(&c.readyFile, "addr-file", env("ESKV_ADDR_FILE", ""), "write the bound HTTP address to this file once listening (ESKV_ADDR_FILE)")
	fs.StringVar(&c.advertiseURL, "advertise-url", env("ESKV_ADVERTISE_URL", ""), "base URL other writers forward this writer's requests to (default http://<bound http address>) (ESKV_ADVERTISE_URL)")
	fs.StringVar(&c.pprofAddr, "pprof-addr", env("ESKV_PPROF_ADDR", ""), "serve net/http/pprof on this address; empty disables it (ESKV_PPROF_ADDR)")
	sweep, err := time.ParseDuration(env("ESKV_SWEEP_INTERVAL", "1s"))
	if err != nil {
		return c, fmt.Errorf("ESKV_SWEEP_INTERVAL: %w", err)
	}
	fs.DurationVar(&c.sweepInterval, "sweep-interval", sweep, "how often the TTL sweeper appends expire events for entries past their expiry; reads hide them at once regardless; negative disables it (ESKV_SWEEP_INTERVAL)")
	fs.IntVar(&c.maxOverlay, "max-overlay", envInt("ESKV_MAX_OVERLAY", 100_000), "per partition, the keys whose latest change the projector has not applied yet beyond which writes answer 503 (backpressure while the projector is down) (ESKV_MAX_OVERLAY)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.maxOverlay < 1 {
		return c, errors.New("max-overlay must be positive")
	}
	if c.sweepInterval == 0 {
		return c, errors.New("sweep-interval must not be 0 (negative disables the sweeper)")
	}
	if c.partitions < 1 {
		return c, errors.New("partitions must be at least 1")
	}
	if c.maxValueBytes < 1 {
		return c, errors.New("max-value-bytes must be positive")
	}
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
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})).With("service", "writer")

	var tokens []api.TokenConfig
	if c.tokensFile != "" {
		if tokens, err = api.LoadTokens(c.tokensFile); err != nil {
			return err
		}
	}
	if c.devToken != "" {
		tokens = append(tokens, api.DevToken(c.devToken))
	}
	if len(tokens) == 0 {
		return errors.New("no tokens configured: set ESKV_DEV_TOKEN or ESKV_TOKENS_FILE")
	}
	tt, err := api.NewTokens(tokens)
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
	store := projection.New(pool)

	ln, err := net.Listen("tcp", c.httpAddr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close()
	if c.advertiseURL == "" {
		c.advertiseURL = "http://" + ln.Addr().String()
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w, err := writer.New(writer.Config{
		Brokers:       strings.Split(c.brokers, ","),
		Topics:        changelog.Topics{Changes: c.topic, Conflicts: c.conflicts, Partitions: int32(c.partitions)},
		CreateTopics:  c.createTopics,
		InstanceID:    c.instanceID,
		AdvertiseURL:  c.advertiseURL,
		Source:        "eskv-writer/" + c.instanceID,
		SweepInterval: c.sweepInterval,
		MaxOverlay:    c.maxOverlay,
	}, store, log, reg)
	if err != nil {
		return err
	}
	srv, err := api.New(api.Config{
		MaxValueBytes: c.maxValueBytes,
		Tokens:        tt,
		Gatherer:      reg,
		Registerer:    reg,
		Ready:         pool.Ping,
		InstanceID:    c.instanceID,
	}, w, store, log)
	if err != nil {
		return err
	}

	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Info("listening", "addr", ln.Addr().String())
	if c.readyFile != "" {
		if err := os.WriteFile(c.readyFile, []byte(ln.Addr().String()), 0o644); err != nil {
			return err
		}
	}

	if c.pprofAddr != "" {
		pl, err := net.Listen("tcp", c.pprofAddr)
		if err != nil {
			return fmt.Errorf("pprof listen: %w", err)
		}
		defer pl.Close()
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		go func() { _ = http.Serve(pl, mux) }()
		log.Info("pprof listening", "addr", pl.Addr().String())
	}

	wctx, wcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer wcancel()
	werr := make(chan error, 1)
	go func() { werr <- w.Run(wctx) }()
	herr := make(chan error, 1)
	go func() { herr <- hs.Serve(ln) }()

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-werr:
		werr = nil
	case runErr = <-herr:
		herr = nil
	}
	// Stop taking requests and answer those in flight, then leave the group.
	sctx, scancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	wcancel()
	if werr != nil {
		if err := <-werr; err != nil && runErr == nil {
			runErr = err
		}
	}
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	log.Info("stopped")
	return nil
}
