package main

import (
	"fmt"
	"math"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/api/client"
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

--format text prints "KEY = N (version V)", json the entry after the
change, value the new number.`, "kvctl "+name, verb),
		Example:           example,
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.subject, a.right = args[0], "write"
			if by == 0 || by == math.MinInt64 {
				return &usageError{msg: fmt.Sprintf("--by %d is not a non-zero 64-bit integer", by), solution: "give a step such as --by 1 or --by 10", cmd: a.cmdPath}
			}
			r.Key, r.By, r.ExpectedVersion, r.RequestID, r.SpecRef = args[0], sign*by, w.expectedVersion(cmd), w.requestID, w.specRef
			var err error
			if r.TTL, err = w.lease(); err != nil {
				return err
			}
			res, err := a.client.Increment(cmd.Context(), r)
			if err != nil {
				return err
			}
			a.noteReplayed(res.Replayed, r.RequestID, "added")
			return a.writeEntry(res.Entry, fmt.Sprintf("%s = %d (version %d)", res.Entry.Key, res.Value, res.Entry.Version))
		},
	}
	f := cmd.Flags()
	f.Int64Var(&by, "by", 1, "the step: how much to "+map[bool]string{true: "add", false: "subtract"}[sign > 0])
	f.BoolVar(&r.Create, "create", false, "start a missing counter from 0")
	w.add(cmd, writeUsage{
		expected:  "change it only if the key is at this version",
		ttl:       "expire the counter this long after the change: a duration (30s, 24h) or seconds",
		requestID: "idempotency id: repeating the change with it does not count twice, and kvctl may retry it",
		specRef:   "reference to the spec or decision record the change follows",
	})
	return cmd
}
