package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/api/client"
	"github.com/eskv/eskv/events"
)

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
