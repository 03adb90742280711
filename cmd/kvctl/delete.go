package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/api/client"
)

func (a *app) deleteCommand() *cobra.Command {
	var (
		expected  int64
		requestID string
	)
	cmd := &cobra.Command{
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
		Args:              args("KEY"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			a.subject, a.right = args[0], "write"
			o := client.DeleteOptions{RequestID: requestID}
			if cmd.Flags().Changed("expected-version") {
				o.ExpectedVersion = &expected
			}
			res, err := a.client.Delete(cmd.Context(), args[0], o)
			if err != nil {
				return err
			}
			if res.Replayed {
				fmt.Fprintf(a.stderr, "note: request %s was already applied; nothing new was deleted\n", requestID)
			}
			switch a.format {
			case formatJSON:
				return writeJSON(a.stdout, res)
			case formatValue:
				_, err := fmt.Fprintln(a.stdout, res.Version)
				return err
			}
			_, err = fmt.Fprintf(a.stdout, "%s deleted at version %d\n", res.Key, res.Version)
			return err
		},
	}
	f := cmd.Flags()
	f.Int64Var(&expected, "expected-version", 0, "delete only if the key is at this version")
	f.StringVar(&requestID, "request-id", "", "idempotency id: repeating the delete with it is answered as a replay")
	return cmd
}
