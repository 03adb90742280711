package kvcli

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eskv/eskv/contract"
)

// writeFlags are the options writes share: --expected-version, --ttl,
// --request-id and --spec-ref.
type writeFlags struct {
	expected  int64
	ttl       string
	requestID string
	specRef   string
}

// writeUsage is the help of each write flag; "" leaves the flag out.
type writeUsage struct {
	expected, ttl, requestID, specRef string
}

func (w *writeFlags) add(cmd *cobra.Command, u writeUsage) {
	f := cmd.Flags()
	if u.expected != "" {
		f.Int64Var(&w.expected, "expected-version", 0, u.expected)
	}
	if u.ttl != "" {
		f.StringVar(&w.ttl, "ttl", "", u.ttl)
	}
	if u.requestID != "" {
		f.StringVar(&w.requestID, "request-id", "", u.requestID)
	}
	if u.specRef != "" {
		f.StringVar(&w.specRef, "spec-ref", "", u.specRef)
	}
}

// expectedVersion is --expected-version when it was given, else nil.
func (w *writeFlags) expectedVersion(cmd *cobra.Command) *int64 {
	if !cmd.Flags().Changed("expected-version") {
		return nil
	}
	v := w.expected
	return &v
}

// lease is --ttl as a duration; 0 when it was not given.
func (w *writeFlags) lease() (time.Duration, error) {
	if w.ttl == "" {
		return 0, nil
	}
	return parseTTL(w.ttl)
}

// writeEntry writes the entry after a write in a.format: json the entry,
// value its value, text the line text.
func (a *app) writeEntry(e contract.Entry, text string) error {
	switch a.format {
	case formatJSON:
		return a.writeJSON(e)
	case formatValue:
		return writeValue(a.stdout, e.Value)
	}
	_, err := fmt.Fprintln(a.stdout, printable(text))
	return err
}

// noteReplayed says on stderr that a write with requestID was a replay:
// nothing new was done (written, added, deleted).
func (a *app) noteReplayed(replayed bool, requestID, done string) {
	if replayed {
		fmt.Fprintf(a.stderr, "note: request %s was already applied; nothing new was %s\n", printable(requestID), done)
	}
}

// durationFlag is a duration option that also takes whole seconds, as the
// seed writes them (--wait 60, --ttl 300): 60 is 60s. Its type is
// "duration", so pflag's GetDuration reads it.
type durationFlag struct{ d *time.Duration }

func (f durationFlag) String() string {
	if f.d == nil || *f.d == 0 {
		return "0" // pflag leaves a default of "0" out of the help
	}
	return f.d.String()
}

func (f durationFlag) Set(v string) error {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n < math.MaxInt64/int64(time.Second) {
		*f.d = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return fmt.Errorf("%q is neither a duration (30s, 5m) nor whole seconds", v)
	}
	*f.d = d
	return nil
}

func (durationFlag) Type() string { return "duration" }

// durationVar adds a durationFlag option with default def.
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, def time.Duration, usage string) {
	*p = def
	f.Var(durationFlag{p}, name, usage)
}
