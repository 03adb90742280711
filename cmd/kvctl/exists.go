package main

import (
	"github.com/spf13/cobra"

	"github.com/eskv/eskv/events"
)

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
