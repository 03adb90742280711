package kvcli

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) getCommand() *cobra.Command {
	var (
		def, at string
		rule    valueRule
	)
	cmd := a.keyCommand(&cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's entry",
		Long: `Print a key's current entry.

--format text prints one field per line, json the entry as the API
answers it (one line), value only the stored JSON value. An absent key
(never written, deleted or expired) exits 1, unless --default VALUE is
given: then VALUE (JSON, or text taken as a JSON string) is printed as
the key's value and kvctl exits 0; json prints {"key","value","default":true}.
Only absence is defaulted: a bad key, a missing right or an unreachable
server fail as usual.

--at POSITION|TIME prints the entry as it was at a point of the past: a
position (a watch event's cursor, p<partition>.o<offset>: every change
of the key's partition up to it) or an RFC 3339 time (the latest change
at or before it, entries expired by then absent). A point older than
the history the server keeps fails with cursor_expired.`,
		Example: `  kvctl get tenant/acme/project/demo/greeting
  kvctl get tenant/acme/project/demo/greeting --format value | jq .hello
  kvctl get tenant/acme/project/demo/greeting --format json | jq .version
  kvctl get config/missing --default none --table tenant/acme/project/demo
  kvctl get tenant/acme/project/demo/greeting --at 2026-03-04T09:00:00Z
  kvctl get tenant/acme/project/demo/greeting --at p2.o1834`,
	}, "read", func(cmd *cobra.Command, key string) error {
		opts, err := atOption(at, a.cmdPath)
		if err != nil {
			return err
		}
		e, err := a.client.Get(cmd.Context(), key, opts...)
		if contract.ErrorCode(err) == contract.ENotFound && cmd.Flags().Changed("default") {
			v, err := rule.parse(def, "--default", a.cmdPath)
			if err != nil {
				return err
			}
			return a.writeDefault(key, v)
		}
		if err != nil {
			return err
		}
		switch {
		case a.format == formatJSON && a.flavor.Seed:
			return a.writeSeedEntry(e)
		case a.format == formatJSON:
			return a.writeJSON(e)
		case a.format == formatValue:
			return writeValue(a.stdout, e.Value)
		}
		return writeEntryText(a.stdout, e)
	})
	rule.add(cmd)
	cmd.Flags().StringVar(&def, "default", "", "print this value (JSON, or text as a JSON string) and exit 0 when the key is absent")
	cmd.Flags().StringVar(&at, "at", "", "read the past: a position (p<partition>.o<offset>, a watch cursor) or an RFC 3339 time")
	return cmd
}

// atOption is --at's read option: none for "", client.At for a position,
// client.AtTime for an RFC 3339 time.
func atOption(at, cmdPath string) ([]client.ReadOption, error) {
	switch {
	case at == "":
		return nil, nil
	case strings.HasPrefix(at, "p"):
		c, err := contract.ParseCursor(at, "at")
		if err != nil {
			return nil, &usageError{msg: err.Error(), solution: "give --at a watch cursor such as p2.o1834", cmd: cmdPath}
		}
		return []client.ReadOption{client.At(c)}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return nil, &usageError{msg: fmt.Sprintf("--at %q is neither a position nor an RFC 3339 time", at),
			solution: "give --at a watch cursor such as p2.o1834 or a time such as 2026-03-04T09:00:00Z", cmd: cmdPath}
	}
	return []client.ReadOption{client.AtTime(t)}, nil
}

// defaultAnswer is get --default's json answer for an absent key.
type defaultAnswer struct {
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Default bool            `json:"default"`
}

// writeDefault prints get --default's value v for the absent key.
func (a *app) writeDefault(key string, v json.RawMessage) error {
	switch a.format {
	case formatJSON:
		return a.writeJSON(defaultAnswer{Key: key, Value: v, Default: true})
	case formatValue:
		return writeValue(a.stdout, v)
	}
	_, err := fmt.Fprintf(a.stdout, "key      %s\nvalue    %s\ndefault  true (the key is absent)\n", printable(key), printable(string(v)))
	return err
}

// args accepts exactly the named positional arguments.
func args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, got []string) error {
		if len(got) == len(names) {
			return nil
		}
		return &usageError{
			msg: fmt.Sprintf("%s takes %s; got %d argument(s)", cmd.CommandPath(), strings.Join(names, " "), len(got)),
			cmd: cmd.CommandPath(),
		}
	}
}

// keyCommand completes a command on one KEY that calls the API: run gets
// the key, which is what errors are about, right the right it needs.
func (a *app) keyCommand(c *cobra.Command, right string, run func(cmd *cobra.Command, key string) error) *cobra.Command {
	c.Args = args("KEY")
	c.Annotations = apiAnnotation
	c.ValidArgsFunction = a.completeKey
	c.RunE = func(cmd *cobra.Command, args []string) error {
		k, err := a.key(args[0])
		if err != nil {
			return err
		}
		a.right = right
		return run(cmd, k)
	}
	return c
}

func (a *app) getCounterCommand() *cobra.Command {
	return a.keyCommand(&cobra.Command{
		Use:   "get-counter KEY",
		Short: "Print a counter's value",
		Long: `Print the value of the counter at KEY: a key whose value is a JSON
integer (see inc and dec). The read is as fresh as get's.

--format text and value print the number, json
{"key","value","type":"counter","version"} (the seed's shape, with the
version).
An absent key (never written, deleted or expired) exits 1, as does a key
that holds anything but an integer.`,
		Example: `  kvctl get-counter tenant/acme/project/demo/visits
  kvctl get-counter tenant/acme/project/demo/visits --format json | jq .version`,
	}, "read", func(cmd *cobra.Command, key string) error {
		n, _, err := client.Call[contract.CounterAnswer](cmd.Context(), a.client, contract.OpGetCounter, key, nil)
		if err != nil {
			return err
		}
		if a.format == formatJSON {
			return a.writeJSON(counterAnswer{Key: n.Key, Value: n.Value, Type: "counter", Version: n.Version})
		}
		_, err = fmt.Fprintln(a.stdout, n.Value)
		return err
	})
}

func (a *app) existsCommand() *cobra.Command {
	return a.keyCommand(&cobra.Command{
		Use:   "exists KEY",
		Short: "Exit 0 if a key exists, 1 if not; print nothing",
		Long: `Check whether a key exists (is written, not deleted, not expired).

Prints nothing: the exit code is the answer, 0 for yes and 1 for no.
Errors (bad key, unreachable server, ...) print as usual and exit 2 or 3.`,
		Example: `  kvctl exists tenant/acme/project/demo/greeting && echo present
  if ! kvctl exists tenant/acme/project/demo/flag; then kvctl set tenant/acme/project/demo/flag false; fi`,
	}, "read", func(cmd *cobra.Command, key string) error {
		_, err := a.client.Get(cmd.Context(), key)
		if contract.ErrorCode(err) == contract.ENotFound {
			return &exitError{code: exitFailed}
		}
		return err
	})
}

// counterAnswer is get-counter's json answer: the seed's
// {"key","value","type":"counter"}, and the version.
type counterAnswer struct {
	Key     string `json:"key"`
	Value   int64  `json:"value"`
	Type    string `json:"type"`
	Version int64  `json:"version"`
}
