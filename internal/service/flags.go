package service

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/peterbourgon/ff/v3"
)

// Flags is a command's flag set in which a flag bound to an ESKV_
// variable with Env takes its value from that variable when the command
// line does not set it. The variable is named in the flag's usage, so -h
// lists the whole configuration; a variable whose value the flag does
// not accept is an error naming the variable.
type Flags struct {
	*flag.FlagSet
	vars map[string]string // flag name → variable
}

// NewFlags returns an empty flag set named name whose usage and errors
// go to stderr.
func NewFlags(name string, stderr io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &Flags{FlagSet: fs, vars: map[string]string{}}
}

// Env binds the flag name, which must be defined, to variable (ESKV_…).
func (f *Flags) Env(name, variable string) {
	fl := f.Lookup(name)
	if fl == nil || !strings.HasPrefix(variable, "ESKV_") {
		panic(fmt.Sprintf("service.Flags.Env(%q, %q): no such flag, or not an ESKV_ variable", name, variable))
	}
	fl.Usage += " (" + variable + ")"
	f.vars[name] = variable
}

// Parse parses args (which must be flags only), then sets every bound
// flag the command line did not set from its variable, through ff.
func (f *Flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", f.Args())
	}
	set := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	// ff names a flag's variable after the flag: here each bound flag's
	// value is registered again under its variable's name.
	env := flag.NewFlagSet(f.Name(), flag.ContinueOnError)
	env.SetOutput(io.Discard)
	for name, variable := range f.vars {
		if !set[name] {
			env.Var(valueOf{f.Lookup(name).Value}, strings.ToLower(strings.TrimPrefix(variable, "ESKV_")), "")
		}
	}
	return ff.Parse(env, nil, ff.WithEnvVarPrefix("ESKV"))
}

// valueOf is a flag's value whose errors quote the value refused.
type valueOf struct{ flag.Value }

func (v valueOf) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return fmt.Errorf("invalid value %q: %w", s, err)
	}
	return nil
}

// Check returns nil when ok, else an error naming the flag (and its
// variable), its value and what is wrong with it. Join several with
// errors.Join.
func (f *Flags) Check(ok bool, name, problem string) error {
	if ok {
		return nil
	}
	what := "-" + name
	if v, bound := f.vars[name]; bound {
		what += " (" + v + ")"
	}
	return fmt.Errorf("%s %s, got %s", what, problem, f.Lookup(name).Value)
}

// Positive checks that each of the named int flags is at least 1.
func (f *Flags) Positive(names ...string) error {
	var errs []error
	for _, name := range names {
		n, _ := f.Lookup(name).Value.(flag.Getter).Get().(int)
		errs = append(errs, f.Check(n >= 1, name, "must be at least 1"))
	}
	return errors.Join(errs...)
}

// LogLevel defines -log-level (ESKV_LOG_LEVEL) on f, def by default.
func LogLevel(f *Flags, def slog.Level) *slog.Level {
	level := def
	f.TextVar(&level, "log-level", def, "the `level` of the JSON logs on stderr: debug, info, warn or error")
	f.Env("log-level", "ESKV_LOG_LEVEL")
	return &level
}

// Logger returns the JSON logger of service at level, writing to w.
func Logger(w io.Writer, level slog.Level, service string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("service", service)
}
