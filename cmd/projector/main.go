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
	"strings"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/projection"
)

func main() { service.Main("projector", run) }

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
func (e *exitError) ExitCode() int { return e.code }

// config is the configuration every command shares; every field is a
// flag whose default comes from an ESKV_ environment variable.
type config struct {
	kafka    service.Kafka
	postgres service.Postgres
	logLevel *slog.Level
}

// newFlags returns the flags of command with the shared ones bound to c;
// the default log level is defLevel.
func newFlags(command string, c *config, defLevel slog.Level, stderr io.Writer) *service.Flags {
	f := service.NewFlags("projector "+command, stderr)
	f.Usage = func() {
		fmt.Fprintf(f.Output(), usage, command)
		f.PrintDefaults()
	}
	c.kafka.Bind(f)
	c.postgres.Bind(f)
	c.logLevel = service.LogLevel(f, defLevel)
	return f
}

// parse parses args into f and checks the shared flags.
func (c *config) parse(f *service.Flags, args []string) error {
	if err := f.Parse(args); err != nil {
		return err
	}
	return errors.Join(f.Positive("partitions"), c.kafka.Check())
}

// historyFormat defines -history-format (ESKV_HISTORY_FORMAT) on f, the
// format in which serve and rebuild write kv_history's rows, and returns
// a check of its value, to run once f is parsed.
func historyFormat(f *service.Flags, format *projection.HistoryFormat) func() error {
	var name string
	f.StringVar(&name, "history-format", projection.HistoryText.String(),
		"the format of new kv_history rows: text (less Postgres CPU per event), which every release reads (0.1.0 on), "+
			"or jsonb, which the development builds before migration 00011 read too")
	return func() error {
		var err error
		*format, err = projection.ParseHistoryFormat(name)
		return f.Check(err == nil, "history-format", "must be jsonb or text")
	}
}

func (c *config) logger(stderr io.Writer) *slog.Logger {
	return service.Logger(stderr, *c.logLevel, "projector")
}

// run runs the command named by args[0] (serve when args is empty or
// starts with a flag).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	command := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, args = args[0], args[1:]
	}
	switch command {
	case "serve":
		return serve(ctx, args, stderr)
	case "rebuild":
		return rebuildCmd(ctx, args, stdout, stderr)
	case "diff":
		// diff(1)'s convention: 1 means "different", 2 "could not compare".
		err := diffCmd(ctx, args, stdout, stderr)
		if _, ok := errors.AsType[*exitError](err); !ok && err != nil && !errors.Is(err, flag.ErrHelp) {
			err = &exitError{code: 2, err: err}
		}
		return err
	default:
		fmt.Fprintf(stderr, usage, "serve")
		return fmt.Errorf("unknown command %q (serve, rebuild or diff)", command)
	}
}
