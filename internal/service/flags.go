package service

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/peterbourgon/ff/v3"
)

// Prefix is the prefix of every setting's environment variable.
const Prefix = "ESKV"

// Flags is a command's flag set. Every setting is declared once, as a
// flag; ff reads it from the environment when the command line does not
// set it, from the variable its rule names after the flag: the prefix,
// then the name upper-cased with - as _. A flag defined on Flags itself
// reads ESKV_<NAME> (-max-list-wait: ESKV_MAX_LIST_WAIT); one defined
// on a Scope reads the scope's prefix instead (the projector's -addr:
// ESKV_PROJECTOR_ADDR); one defined on Arguments reads none; the few
// whose variable predates the rule name it with Rename. The
// variable is named in the flag's usage, so -h lists the whole
// configuration; a variable whose value the flag does not accept is an
// error naming the variable.
type Flags struct {
	*flag.FlagSet
	groups   []group           // the sets of Scope and Arguments, merged into FlagSet by Parse
	renamed  map[string]string // flag → variable, where it predates ff's rule (Rename)
	prefixes map[string]string // setting → its variable's prefix, once Parse merged the groups
	vars     map[string]string // setting → variable, once Parse named them
}

// group is a flag set whose flags Parse merges into Flags: prefix "" is
// the command line's alone.
type group struct {
	prefix string
	set    *flag.FlagSet
}

// NewFlags returns an empty flag set named name whose usage and errors
// go to stderr.
func NewFlags(name string, stderr io.Writer) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &Flags{FlagSet: fs, renamed: map[string]string{}}
}

// Scope returns the set of the flags whose variables are named with
// prefix (ESKV_<SCOPE>) instead of ESKV: a command's own settings, whose
// names would otherwise be ambiguous among the services sharing an
// environment (-addr of the projector and of the auditor).
func (f *Flags) Scope(prefix string) *flag.FlagSet {
	if !strings.HasPrefix(prefix, Prefix+"_") {
		panic(fmt.Sprintf("service.Flags.Scope(%q): not an %s_ prefix", prefix, Prefix))
	}
	return f.group(prefix)
}

// Arguments returns the set of the flags that are arguments of one run
// (a report's range, a rebuild's schema) rather than settings: the
// command line alone sets them.
func (f *Flags) Arguments() *flag.FlagSet { return f.group("") }

func (f *Flags) group(prefix string) *flag.FlagSet {
	for _, g := range f.groups {
		if g.prefix == prefix {
			return g.set
		}
	}
	g := group{prefix: prefix, set: flag.NewFlagSet(f.Name(), flag.ContinueOnError)}
	f.groups = append(f.groups, g)
	return g.set
}

// Rename names the variable of the flag name where it predates ff's
// rule (the writer's -instance-id reads ESKV_WRITER_ID): the variable
// the rule names then sets nothing. A variable the rule would name
// anyway is refused: Rename is for the exceptions.
func (f *Flags) Rename(name, variable string) {
	if !strings.HasPrefix(variable, Prefix+"_") {
		panic(fmt.Sprintf("service.Flags.Rename(%q, %q): not an %s_ variable", name, variable, Prefix))
	}
	f.renamed[name] = variable
}

// Variable is the variable ff reads the flag name from with prefix:
// prefix_NAME, upper-cased, with -, . and / as _.
func Variable(prefix, name string) string {
	return prefix + "_" + strings.NewReplacer("-", "_", ".", "_", "/", "_").Replace(strings.ToUpper(name))
}

// Variables returns each setting's variable by flag name, once Parse
// named them.
func (f *Flags) Variables() map[string]string { return maps.Clone(f.vars) }

// Parse parses args (which must be flags only), then sets every setting
// the command line did not set from its variable, through ff.
func (f *Flags) Parse(args []string) error {
	f.name()
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if f.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %q", f.Args())
	}
	set := map[string]bool{}
	f.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	// The settings the command line left unset, by prefix, under their
	// own names (a renamed one under its variable's), for ff.
	envs := map[string]*flag.FlagSet{}
	for name, prefix := range f.prefixes {
		if set[name] {
			continue
		}
		as := name
		if v, ok := f.renamed[name]; ok {
			prefix, as = Prefix, strings.TrimPrefix(v, Prefix+"_")
		}
		if envs[prefix] == nil {
			envs[prefix] = flag.NewFlagSet(f.Name(), flag.ContinueOnError)
			envs[prefix].SetOutput(io.Discard)
		}
		envs[prefix].Var(valueOf{f.Lookup(name).Value}, as, "")
	}
	for _, prefix := range slices.Sorted(maps.Keys(envs)) {
		if err := ff.Parse(envs[prefix], nil, ff.WithEnvVarPrefix(prefix)); err != nil {
			return err
		}
	}
	return nil
}

// name merges the groups' flags into f.FlagSet and names every
// setting's variable, in f.vars and in its usage. Parse calls it, before
// the command line is parsed so that -h shows the variables.
func (f *Flags) name() {
	if f.vars != nil {
		return
	}
	f.vars, f.prefixes = map[string]string{}, map[string]string{}
	f.VisitAll(func(fl *flag.Flag) { f.prefixes[fl.Name] = Prefix })
	for _, g := range f.groups {
		g.set.VisitAll(func(fl *flag.Flag) {
			f.Var(fl.Value, fl.Name, fl.Usage)
			if g.prefix != "" {
				f.prefixes[fl.Name] = g.prefix
			}
		})
	}
	for name, v := range f.renamed {
		if p := f.prefixes[name]; p == "" || v == Variable(p, name) {
			panic(fmt.Sprintf("service.Flags.Rename(%q, %q): no such setting, or the variable ff names anyway", name, v))
		}
	}
	for name, prefix := range f.prefixes {
		f.vars[name] = cmp.Or(f.renamed[name], Variable(prefix, name))
		f.Lookup(name).Usage += " (" + f.vars[name] + ")"
	}
}

// valueOf is a flag's value whose errors quote the value refused.
type valueOf struct{ flag.Value }

func (v valueOf) Set(s string) error {
	if err := v.Value.Set(s); err != nil {
		return fmt.Errorf("invalid value %q: %w", s, err)
	}
	return nil
}

// Off is a setting's value v as a library's Config takes it. In a
// setting, 0 is never a silent default: it turns the feature off (the
// usage says so: "0 disables …"), stands for a default the usage names,
// or is refused by a check naming the variable. A Config's 0 is its
// default and a negative value turns the feature off (Go's useful zero
// value), so a setting whose 0 means off reaches it through Off.
func Off[T ~int | ~int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
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
	return &level
}

// Logger returns the JSON logger of service at level, writing to w.
func Logger(w io.Writer, level slog.Level, service string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("service", service)
}
