// Package cli is what the mains of eskvbench and eskvchaos share: flags
// whose defaults come from environment variables (ff), and a main that
// stops the tool cleanly on the first Ctrl-C and at once on the second.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/peterbourgon/ff/v3"
)

// Main runs the tool name until run returns; the first SIGINT or SIGTERM
// cancels its context (the tool then stops its services in order), a
// second one exits at once (the services die with the tool: Pdeathsig).
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Parse parses args into fs; a flag not on the command line is read from
// the environment variable prefix_FLAG_NAME (ff), else from the variable
// aliases names for it (a variable other tools read too, such as
// ESKV_PARTITIONS). A bad value is an error naming the variable.
func Parse(fs *flag.FlagSet, args []string, prefix string, aliases map[string]string) error {
	if err := ff.Parse(fs, args, ff.WithEnvVarPrefix(prefix)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for name, env := range aliases {
		if v := os.Getenv(env); v != "" && !set[name] {
			if err := fs.Set(name, v); err != nil {
				return fmt.Errorf("environment variable %s: %w", env, err)
			}
		}
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	return nil
}

// SetEnv is for tests of a tool's flags: it empties, for the test, the
// ESKV_ variables of the environment and those named in clear, which
// Parse would read, and sets those of m.
func SetEnv(tb testing.TB, m map[string]string, clear ...string) {
	tb.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "ESKV_") || slices.Contains(clear, name) {
			tb.Setenv(name, "")
		}
	}
	for k, v := range m {
		tb.Setenv(k, v)
	}
}
