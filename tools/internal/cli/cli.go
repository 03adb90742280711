// Package cli is what the mains of eskvbench and eskvchaos share beyond
// internal/service's Main: flags whose defaults come from environment
// variables (ff) with a prefix of their own.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/peterbourgon/ff/v3"
)

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
