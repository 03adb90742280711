package kvcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/gowebpki/jcs"
	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) deleteCommand() *cobra.Command {
	var (
		w       writeFlags
		ifValue string
		rf      rangeFlags
		rule    valueRule
	)
	cmd := a.keyCommand(&cobra.Command{
		Use:   "delete (KEY | --prefix PREFIX [--chunked])",
		Short: "Delete a key (optionally only at an expected version), or every key under a prefix",
		Long: `Delete a key. The delete is itself a version: the key's next one.

With --expected-version N the delete happens only while the key is at
version N; otherwise it exits 1 and says the current version. An absent
key exits 1.

With --if-value VALUE the delete happens only while the key holds VALUE
(JSON, or text taken as a JSON string; compared as JSON, so key order and
number spelling do not matter): kvctl reads the key, compares, and
deletes at the version it read, so a change in between exits 1 too and
deletes nothing.

--format text prints "KEY deleted at version N", json
{"key","version","deleted":true}, value the delete's version.` + deletePrefixHelp,
		Example: `  kvctl delete tenant/acme/project/demo/greeting
  kvctl delete tenant/acme/project/demo/greeting --expected-version 3
  kvctl delete config/api-key --if-value sk-abc123 --table tenant/acme/project/demo   # only while it holds "sk-abc123"
  kvctl delete tenant/acme/project/demo/greeting --request-id cleanup-42   # safe to repeat
  kvctl delete --prefix tenant/acme/project/demo/jobs/2026-11/
  kvctl delete --prefix tenant/acme/project/demo/cache/ --chunked`,
	}, "write", func(cmd *cobra.Command, key string) error {
		o := client.DeleteOptions{RequestID: w.requestID, ExpectedVersion: w.expectedVersion(cmd)}
		if cmd.Flags().Changed("if-value") {
			if o.ExpectedVersion != nil {
				return &usageError{msg: "--if-value and --expected-version both given", solution: "give one condition: --if-value pins the version it reads", cmd: a.cmdPath}
			}
			want, err := rule.parse(ifValue, "--if-value", a.cmdPath)
			if err != nil {
				return err
			}
			v, err := a.versionIfValue(cmd.Context(), key, want)
			if err != nil {
				return err
			}
			o.ExpectedVersion = &v
		}
		res, err := a.client.Delete(cmd.Context(), key, o)
		if contract.ErrorCode(err) == contract.EConflict && cmd.Flags().Changed("if-value") && o.RequestID == "" {
			return &failure{code: exitFailed, msg: fmt.Sprintf("%s changed after kvctl read it (it was at version %d); nothing was deleted", key, *o.ExpectedVersion),
				solution: "run the command again: it deletes only while the key holds the value"}
		}
		if err != nil {
			return err
		}
		a.noteReplayed(res.Replayed, w.requestID, "deleted")
		switch a.format {
		case formatJSON:
			return a.writeJSON(res)
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
	rule.add(cmd)
	cmd.Flags().StringVar(&ifValue, "if-value", "", "delete only while the key holds this value (JSON, or text as a JSON string)")
	a.withPrefix(cmd, &rf)
	return cmd
}

// versionIfValue reads key and returns its version when its value equals
// want (JSON, or text taken as a JSON string); otherwise a failure that
// names the version but not the value.
func (a *app) versionIfValue(ctx context.Context, key string, want json.RawMessage) (int64, error) {
	e, err := a.client.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if !jsonEqual(e.Value, want) {
		return 0, &failure{code: exitFailed, msg: fmt.Sprintf("%s holds another value than --if-value (at version %d); nothing was deleted", key, e.Version),
			solution: fmt.Sprintf("see its value with 'kvctl get %s'; delete it regardless with --expected-version %d", key, e.Version)}
	}
	return e.Version, nil
}

// jsonEqual compares two JSON values canonically (RFC 8785: key order,
// number spelling and string escapes do not matter), as the writer
// compares a field condition's value.
func jsonEqual(a, b json.RawMessage) bool {
	ca, err1 := jcs.Transform(a)
	cb, err2 := jcs.Transform(b)
	return err1 == nil && err2 == nil && bytes.Equal(ca, cb)
}
