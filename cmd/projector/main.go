// Command projector folds kv.changes into the Postgres projection
// (kv_entries, kv_history, projector_offsets), exactly once, and serves
// /healthz, /readyz and /metrics (projector serve, the default); rebuilds
// the projection from the compacted topic into another schema (projector
// rebuild); and compares two projections (projector diff).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/eskv/eskv/changelog"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal stops gracefully; a second one exits at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(exitCode(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr), os.Stderr))
}

const usage = `Usage:
  projector [serve] [flags]                 fold kv.changes into Postgres; serve /healthz, /readyz, /metrics
  projector rebuild --into SCHEMA [flags]   fold the compacted kv.changes into a fresh schema
  projector diff [--schema SCHEMA] [flags]  compare two projections (default: the live one with a fresh fold of the log)

Flags of %s:
`

// exitError is an error with the process exit code it calls for.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode prints err (unless nil or a help request) and returns the
// process exit code: 0 without error, an exitError's code, else 1.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "projector:", err)
	if ee, ok := errors.AsType[*exitError](err); ok {
		return ee.code
	}
	return 1
}

// config is the configuration every command shares; every field is a
// flag whose default comes from an ESKV_ environment variable.
type config struct {
	brokers     string
	postgresURL string
	topic       string
	partitions  int
	logLevel    string
}

// env returns getenv(name), or def when unset.
type env func(name, def string) string

func envOf(getenv func(string) string) env {
	return func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
}

// newFlagSet returns the flag set of command with the shared flags bound
// to c. The returned function checks them after parsing. The default log
// level is defLevel unless ESKV_LOG_LEVEL says otherwise.
func newFlagSet(command string, c *config, e env, defLevel string, stderr io.Writer) (*flag.FlagSet, func() error) {
	fs := flag.NewFlagSet("projector "+command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), usage, command)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.brokers, "brokers", e("ESKV_BROKERS", "127.0.0.1:19092"), "Kafka seed brokers, comma-separated (ESKV_BROKERS)")
	fs.StringVar(&c.postgresURL, "postgres-url", e("ESKV_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/eskv?sslmode=disable"), "Postgres URL of the projection (ESKV_POSTGRES_URL)")
	fs.StringVar(&c.topic, "topic", e("ESKV_TOPIC", changelog.DefaultChangesTopic), "changes topic (ESKV_TOPIC)")
	partitions := e("ESKV_PARTITIONS", strconv.Itoa(changelog.DefaultPartitions))
	fs.StringVar(&partitions, "partitions", partitions, "partition count the changes topic must have (ESKV_PARTITIONS)")
	fs.StringVar(&c.logLevel, "log-level", e("ESKV_LOG_LEVEL", defLevel), "debug, info, warn or error; JSON logs go to stderr (ESKV_LOG_LEVEL)")
	return fs, func() error {
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected arguments: %q", fs.Args())
		}
		n, err := strconv.Atoi(partitions)
		if err != nil || n < 1 {
			return fmt.Errorf("partitions must be a positive integer, got %q", partitions)
		}
		c.partitions = n
		return nil
	}
}

func (c *config) logger(stderr io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: level})).With("service", "projector"), nil
}

func (c *config) brokerList() []string { return strings.Split(c.brokers, ",") }

// run runs the command named by args[0] (serve when args is empty or
// starts with a flag).
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	command := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, args = args[0], args[1:]
	}
	e := envOf(getenv)
	switch command {
	case "serve":
		return serve(ctx, args, e, stderr)
	case "rebuild":
		return rebuildCmd(ctx, args, e, stdout, stderr)
	case "diff":
		// diff(1)'s convention: 1 means "different", 2 "could not compare".
		err := diffCmd(ctx, args, e, stdout, stderr)
		if _, ok := errors.AsType[*exitError](err); !ok && err != nil && !errors.Is(err, flag.ErrHelp) {
			err = &exitError{code: 2, err: err}
		}
		return err
	default:
		fmt.Fprintf(stderr, usage, "serve")
		return fmt.Errorf("unknown command %q (serve, rebuild or diff)", command)
	}
}
