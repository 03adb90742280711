// Command devbroker is the local stack's Kafka-protocol broker: franz-go's
// kfake as a single node on 127.0.0.1, persisting to a data directory with a
// sync per write, so a kill -9 loses nothing that was acknowledged.
//
// It creates no topics; the writer does. It is for development only: it is
// not Apache Kafka (see SERVICES.md for where kfake differs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"
)

// clusterID is fixed so that restarts on the same data directory present
// the same cluster to clients.
const clusterID = "eskv-devbroker"

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil &&
		!errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type config struct {
	port     int
	dataDir  string
	logLevel slog.Level
	sync     bool
}

func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("devbroker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr(getenv, "ESKV_BROKER_PORT", "19092"),
		"port to listen on, always on 127.0.0.1 (\"19092\", \":19092\" or \"127.0.0.1:19092\"; 0 picks a free port) (env ESKV_BROKER_PORT)")
	dataDir := fs.String("data", envOr(getenv, "ESKV_BROKER_DATA", ".eskv/broker"),
		"directory the broker persists to; reloaded on start (env ESKV_BROKER_DATA)")
	level := fs.String("log-level", envOr(getenv, "ESKV_BROKER_LOG_LEVEL", "warn"),
		"debug, info, warn or error; info and debug include kfake's per-request logs (env ESKV_BROKER_LOG_LEVEL)")
	sync := fs.Bool("sync", envOr(getenv, "ESKV_BROKER_SYNC", "false") == "true",
		"fsync every write, so acknowledged writes survive a machine crash too; without it they survive a kill -9 of the broker, as with Kafka's default flush policy (env ESKV_BROKER_SYNC)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	port, err := parsePort(*addr)
	if err != nil {
		return config{}, err
	}
	if *dataDir == "" {
		return config{}, errors.New("-data must not be empty")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return config{}, fmt.Errorf("-log-level: %w", err)
	}
	return config{port: port, dataDir: *dataDir, logLevel: lvl, sync: *sync}, nil
}

// parsePort accepts a bare port or a host:port whose host is empty or
// loopback: kfake always binds 127.0.0.1.
func parsePort(addr string) (int, error) {
	p := addr
	if strings.Contains(addr, ":") {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return 0, fmt.Errorf("-addr %q: %w", addr, err)
		}
		switch host {
		case "", "127.0.0.1", "localhost":
		default:
			return 0, fmt.Errorf("-addr %q: the dev broker only listens on 127.0.0.1", addr)
		}
		p = port
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return 0, fmt.Errorf("-addr %q: not a port", addr)
	}
	return n, nil
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, getenv, stderr)
	if err != nil {
		return err
	}
	// Our own lines (address, start, stop) are always at info; -log-level
	// filters what kfake says.
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: min(cfg.logLevel, slog.LevelInfo)}))

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(cfg.port),
		kfake.ClusterID(clusterID),
		kfake.DataDir(cfg.dataDir),
		kfake.WithLogger(kfakeLogger{log: log, min: cfg.logLevel}),
		kfake.BrokerConfigs(map[string]string{
			// Kafka's default, stated so the writer's transaction
			// timeout is checked against a known ceiling.
			"transaction.max.timeout.ms": "900000",
			// kfake's compaction ignores the last stable offset (it can
			// drop a key's committed value while a transaction is open),
			// so compact rarely: hourly, not Kafka's 15 s.
			"log.cleaner.backoff.ms": "3600000",
		}),
	}
	if cfg.sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	log.Info("broker listening", "addr", strings.Join(c.ListenAddrs(), ","),
		"data", cfg.dataDir, "cluster_id", clusterID, "fsync", cfg.sync)

	<-ctx.Done()
	stop() // a second signal now kills the process outright
	log.Info("broker stopping")
	c.Close()
	log.Info("broker stopped")
	return nil
}

func envOr(getenv func(string) string, key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

// kfakeLogger bridges kfake's printf logger into slog, dropping what is
// below min.
type kfakeLogger struct {
	log *slog.Logger
	min slog.Level
}

func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelInfo
	case kfake.LogLevelDebug:
		lvl = slog.LevelDebug
	default:
		return
	}
	if lvl < l.min {
		return
	}
	l.log.Log(context.Background(), lvl, fmt.Sprintf(format, args...), "component", "kfake")
}
