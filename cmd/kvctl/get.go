package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

func (a *app) getCommand() *cobra.Command {
	return a.keyCommand(&cobra.Command{
		Use:   "get KEY",
		Short: "Print a key's entry",
		Long: `Print a key's current entry.

--format text prints one field per line, json the entry as the API
answers it (one line), value only the stored JSON value. An absent key
(never written, deleted or expired) exits 1.`,
		Example: `  kvctl get tenant/acme/project/demo/greeting
  kvctl get tenant/acme/project/demo/greeting --format value | jq .hello
  kvctl get tenant/acme/project/demo/greeting --format json | jq .version`,
	}, "read", func(cmd *cobra.Command, key string) error {
		e, err := a.client.Get(cmd.Context(), key)
		if err != nil {
			return err
		}
		switch a.format {
		case formatJSON:
			return writeJSON(a.stdout, e)
		case formatValue:
			return writeValue(a.stdout, e.Value)
		}
		return writeEntryText(a.stdout, e)
	})
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
		a.subject, a.right = args[0], right
		return run(cmd, args[0])
	}
	return c
}

func (a *app) getCounterCommand() *cobra.Command {
	return a.keyCommand(&cobra.Command{
		Use:   "get-counter KEY",
		Short: "Print a counter's value",
		Long: `Print the value of the counter at KEY: a key whose value is a JSON
integer (see inc and dec). The read is as fresh as get's.

--format text and value print the number, json {"key","value","version"}.
An absent key (never written, deleted or expired) exits 1, as does a key
that holds anything but an integer.`,
		Example: `  kvctl get-counter tenant/acme/project/demo/visits
  kvctl get-counter tenant/acme/project/demo/visits --format json | jq .version`,
	}, "read", func(cmd *cobra.Command, key string) error {
		n, _, err := client.Call[events.CounterAnswer](cmd.Context(), a.client, events.OpGetCounter, key, nil)
		if err != nil {
			return err
		}
		if a.format == formatJSON {
			return writeJSON(a.stdout, n)
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
		if events.ErrorCode(err) == events.ENotFound {
			return &exitError{code: exitFailed}
		}
		return err
	})
}
