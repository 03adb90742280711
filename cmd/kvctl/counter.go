package main

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
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
	var (
		by int64
		w  writeFlags
		r  client.IncrementRequest
		b  bounds
	)
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
echo "Rate limit exceeded"'). kvctl reads the counter and increments it
at the version it read, reading again when another writer came first, so
concurrent decrements never take it past the bound.

--format text prints "KEY = N (version V)", json the entry after the
change with the seed's "previous" (the value before it), value the new
number.`, "kvctl "+name, verb),
		Example:           example,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			key, err := a.key(args[0])
			if err != nil {
				return err
			}
			a.right = "write"
			if by == 0 || by == math.MinInt64 {
				return &usageError{msg: fmt.Sprintf("--by %d is not a non-zero 64-bit integer", by), solution: "give a step such as --by 1 or --by 10", cmd: a.cmdPath}
			}
			r.Key, r.By, r.ExpectedVersion, r.RequestID, r.SpecRef = key, sign*by, w.expectedVersion(cmd), w.requestID, w.specRef
			if r.TTL, err = w.lease(); err != nil {
				return err
			}
			b.min, b.max = cmd.Flags().Changed("min"), cmd.Flags().Changed("max")
			res, err := a.boundedIncrement(cmd.Context(), r, b)
			if err != nil {
				return err
			}
			a.noteReplayed(res.Replayed, r.RequestID, "added")
			if a.format == formatJSON { // the entry, and the seed's "previous"
				return writeJSON(a.stdout, counterEntry{Entry: res.Entry, Previous: res.Value - r.By})
			}
			return a.writeEntry(res.Entry, fmt.Sprintf("%s = %d (version %d)", res.Entry.Key, res.Value, res.Entry.Version))
		},
	}
	f := cmd.Flags()
	f.Int64Var(&by, "by", 1, "the step: how much to "+map[bool]string{true: "add", false: "subtract"}[sign > 0])
	f.BoolVar(&r.Create, "create", false, "start a missing counter from 0")
	f.Int64Var(&b.lo, "min", 0, "fail (exit 1, nothing changed) when the result would be below this, e.g. --min 0 for a quota")
	f.Int64Var(&b.hi, "max", 0, "fail (exit 1, nothing changed) when the result would be above this")
	w.add(cmd, writeUsage{
		expected:  "change it only if the key is at this version",
		ttl:       "expire the counter this long after the change: a duration (30s, 24h) or seconds",
		requestID: "idempotency id: repeating the change with it does not count twice, and kvctl may retry it",
		specRef:   "reference to the spec or decision record the change follows",
	})
	return cmd
}

// bounds are --min and --max of inc and dec; min and max say which were
// given.
type bounds struct {
	lo, hi   int64
	min, max bool
}

// check returns a failure when next leaves the bounds.
func (b bounds) check(key string, cur, step, next int64) error {
	verb, by := "adding", step
	if step < 0 {
		verb, by = "subtracting", -step
	}
	switch {
	case b.min && next < b.lo:
		return &failure{code: exitFailed, msg: fmt.Sprintf("counter %s is %d: %s %d would take it below --min %d", key, cur, verb, by, b.lo),
			solution: fmt.Sprintf("nothing was changed: wait until the counter is refilled (e.g. 'kvctl set %s N'), or lower --min", key)}
	case b.max && next > b.hi:
		return &failure{code: exitFailed, msg: fmt.Sprintf("counter %s is %d: %s %d would take it above --max %d", key, cur, verb, by, b.hi),
			solution: fmt.Sprintf("nothing was changed: wait until the counter is lowered (e.g. 'kvctl set %s 0'), or raise --max", key)}
	}
	return nil
}

// maxBoundedTries bounds how often a bounded increment reads again after
// another writer changed the counter between its read and its write.
const maxBoundedTries = 100

// boundedIncrement increments r within b: without bounds it is one
// Increment; with them it reads the counter, checks the result, and
// increments at the version it read (a compare-and-swap), reading again
// when another writer came first, unless --expected-version fixed the
// version.
func (a *app) boundedIncrement(ctx context.Context, r client.IncrementRequest, b bounds) (client.Counter, error) {
	if !b.min && !b.max {
		return a.client.Increment(ctx, r)
	}
	for try := 1; ; try++ {
		var cur, version int64
		n, _, err := client.Call[events.CounterAnswer](ctx, a.client, events.OpGetCounter, r.Key, nil)
		switch {
		case err == nil:
			cur, version = n.Value, n.Version
		case events.ErrorCode(err) == events.ENotFound && r.Create:
		default:
			return client.Counter{}, err
		}
		next := cur + r.By
		if (r.By > 0) != (next > cur) { // overflow: the server says out_of_range
			next = cur
		}
		if err := b.check(r.Key, cur, r.By, next); err != nil {
			return client.Counter{}, err
		}
		cas := r
		if cas.ExpectedVersion == nil {
			cas.ExpectedVersion = &version
		}
		res, err := a.client.Increment(ctx, cas)
		var e *events.Error
		raced := errors.As(err, &e) && e.Code == events.EConflict && e.Field != "requestId" // not a reused --request-id
		if r.ExpectedVersion != nil || !raced || try == maxBoundedTries {
			return res, err
		}
	}
}

// counterEntry is inc and dec's json answer: the entry after the change
// and, as the seed's inc answers, the value before it.
type counterEntry struct {
	events.Entry
	Previous int64 `json:"previous"`
}
