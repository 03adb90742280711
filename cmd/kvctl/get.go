package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
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
