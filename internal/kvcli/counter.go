package kvcli

import (
	"errors"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) incCommand() *cobra.Command {
	return a.counterCommand("inc", 1, `Add to a counter`, `  kvctl inc tenant/acme/project/demo/visits --create
  kvctl inc tenant/acme/project/demo/visits --by 10 --format value
  kvctl inc tenant/acme/project/demo/quota --by 5 --expected-version 7
  kvctl inc tenant/acme/project/demo/rate/2026-11-22T15 --create --ttl 2h
  kvctl inc tenant/acme/project/demo/batches --request-id batch-42   # safe to repeat`)
}

func (a *app) decCommand() *cobra.Command {
	return a.counterCommand("dec", -1, `Subtract from a counter`, `  kvctl dec tenant/acme/project/demo/stock
  kvctl dec tenant/acme/project/demo/stock --by 3 --format value
  kvctl dec tenant/acme/project/demo/slots --create   # a missing counter starts from 0: -1`)
}

// counterCommand is inc (sign 1) or dec (sign -1).
func (a *app) counterCommand(name string, sign int64, short, example string) *cobra.Command {
	var o counterOptions
	verb := "adds"
	if sign < 0 {
		verb = "subtracts"
	}
	cmd := &cobra.Command{
		Use:   name + " KEY",
		Short: short + " (atomically, on the server)",
		Long: fmt.Sprintf(`%s --by N (default 1) %s the counter at KEY: a key whose value
is a JSON integer. The server decides the new value, so concurrent
counters never lose an update.

A missing key exits 1 unless --create starts it from 0 (a new counter
gets purpose counter). A key that holds anything but an integer, or a
result outside the 64-bit integer range, exits 1 and changes nothing.
--expected-version makes it a compare-and-swap; --ttl sets a new expiry
(without it the counter keeps its own).

--min and --max bound the result: when it would leave them, kvctl exits
1 and changes nothing (the seed's rate limit: 'kvctl dec KEY --min 0 ||
echo "Rate limit exceeded"'). The server checks the bounds as it decides
the increment, in the same single request, so concurrent decrements
never take the counter past a bound.

--format text prints "KEY = N (version V)", json the entry after the
change with the seed's "previous" (the value before it), value the new
number.`, "kvctl "+name, verb),
		Example:           example,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.count(cmd, args[0], sign, &o)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.by, "by", 1, "the step: how much to "+map[bool]string{true: "add", false: "subtract"}[sign > 0])
	f.BoolVar(&o.r.Create, "create", false, "start a missing counter from 0")
	f.Int64Var(&o.lo, "min", 0, "fail (exit 1, nothing changed) when the result would be below this, e.g. --min 0 for a quota")
	f.Int64Var(&o.hi, "max", 0, "fail (exit 1, nothing changed) when the result would be above this")
	o.w.add(cmd, writeUsage{
		expected:  "change it only if the key is at this version",
		ttl:       "expire the counter this long after the change: a duration (30s, 24h) or seconds",
		requestID: "idempotency id: repeating the change with it does not count twice, and kvctl may retry it",
		specRef:   "reference to the spec or decision record the change follows",
	})
	return cmd
}

// counterOptions are inc's and dec's flags.
type counterOptions struct {
	by     int64
	w      writeFlags
	r      client.IncrementRequest // --create
	lo, hi int64                   // --min, --max
}

// count adds sign × --by to the counter at KEY (arg) as o says.
func (a *app) count(cmd *cobra.Command, arg string, sign int64, o *counterOptions) error {
	key, err := a.key(arg)
	if err != nil {
		return err
	}
	a.right = "write"
	if o.by == 0 || o.by == math.MinInt64 {
		return &usageError{msg: fmt.Sprintf("--by %d is not a non-zero 64-bit integer", o.by), solution: "give a step such as --by 1 or --by 10", cmd: a.cmdPath}
	}
	r := o.r
	r.Key, r.By, r.ExpectedVersion, r.RequestID, r.SpecRef = key, sign*o.by, o.w.expectedVersion(cmd), o.w.requestID, o.w.specRef
	if r.TTL, err = o.w.lease(); err != nil {
		return err
	}
	if cmd.Flags().Changed("min") {
		r.Min = &o.lo
	}
	if cmd.Flags().Changed("max") {
		r.Max = &o.hi
	}
	res, err := a.client.Increment(cmd.Context(), r)
	if err != nil {
		return boundFailure(r, err)
	}
	a.noteReplayed(res.Replayed, r.RequestID, "added")
	if a.format == formatJSON { // the entry, and the seed's "previous"
		return a.writeJSON(counterEntry{Entry: res.Entry, Previous: res.Value - r.By})
	}
	return a.writeEntry(res.Entry, fmt.Sprintf("%s = %d (version %d)", res.Entry.Key, res.Value, res.Entry.Version))
}

// boundFailure is err, the answer to increment r, explained for the
// shell when the server refused it for leaving --min or --max: exit 1,
// the counter's value (when the token may read it) and what to do. Any
// other error is err itself.
func boundFailure(r client.IncrementRequest, err error) error {
	var e *contract.Error
	if !errors.As(err, &e) || e.Code != contract.EOutOfRange || (e.Field != "min" && e.Field != "max") {
		return err
	}
	is := " is 0" // absent, started from 0 by --create
	if e.Current != nil {
		is = " is " + string(e.Current.Value)
		if len(e.Current.Value) == 0 { // the token may write the key but not read it
			is = fmt.Sprintf(" (version %d; its value is shown only to tokens that may read it)", e.Current.Version)
		}
	}
	verb, by := "adding", r.By
	if by < 0 {
		verb, by = "subtracting", -by
	}
	if e.Field == "min" {
		return &failure{code: exitFailed, msg: fmt.Sprintf("counter %s%s: %s %d would take it below --min %d", r.Key, is, verb, by, *r.Min),
			solution: fmt.Sprintf("nothing was changed: wait until the counter is refilled (e.g. 'kvctl set %s N'), or lower --min", r.Key)}
	}
	return &failure{code: exitFailed, msg: fmt.Sprintf("counter %s%s: %s %d would take it above --max %d", r.Key, is, verb, by, *r.Max),
		solution: fmt.Sprintf("nothing was changed: wait until the counter is lowered (e.g. 'kvctl set %s 0'), or raise --max", r.Key)}
}

// counterEntry is inc and dec's json answer: the entry after the change
// and, as the seed's inc answers, the value before it.
type counterEntry struct {
	contract.Entry
	Previous int64 `json:"previous"`
}
