package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/api/client"
)

func (a *app) deleteCommand() *cobra.Command {
	var w writeFlags
	cmd := a.keyCommand(&cobra.Command{
		Use:   "delete KEY",
		Short: "Delete a key (optionally only at an expected version)",
		Long: `Delete a key. The delete is itself a version: the key's next one.

With --expected-version N the delete happens only while the key is at
version N; otherwise it exits 1 and says the current version. An absent
key exits 1.

--format text prints "KEY deleted at version N", json
{"key","version","deleted":true}, value the delete's version.`,
		Example: `  kvctl delete tenant/acme/project/demo/greeting
  kvctl delete tenant/acme/project/demo/greeting --expected-version 3
  kvctl delete tenant/acme/project/demo/greeting --request-id cleanup-42   # safe to repeat`,
	}, "write", func(cmd *cobra.Command, key string) error {
		res, err := a.client.Delete(cmd.Context(), key, client.DeleteOptions{RequestID: w.requestID, ExpectedVersion: w.expectedVersion(cmd)})
		if err != nil {
			return err
		}
		a.noteReplayed(res.Replayed, w.requestID, "deleted")
		switch a.format {
		case formatJSON:
			return writeJSON(a.stdout, res)
		case formatValue:
			_, err := fmt.Fprintln(a.stdout, res.Version)
			return err
		}
		_, err = fmt.Fprintf(a.stdout, "%s deleted at version %d\n", printable(res.Key), res.Version)
		return err
	})
	w.add(cmd, writeUsage{
		expected:  "delete only if the key is at this version",
		requestID: "idempotency id: repeating the delete with it is answered as a replay",
	})
	return cmd
}
