package kvcli

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) touchCommand() *cobra.Command {
	var (
		w       writeFlags
		persist bool
	)
	cmd := a.keyCommand(&cobra.Command{
		Use:   "touch KEY (--ttl DURATION | --persist)",
		Short: "Give a key a new expiry, or none, without rewriting its value",
		Long: `Set the expiry of the key's entry to --ttl from now (Redis EXPIRE), or
remove it with --persist (Redis PERSIST). The value, semantics and spec
reference stay as they are, byte for byte. The touch is a write: the
key's next version, seen by watchers and kept in its history.

An absent, deleted or expired key exits 1: a touch never creates one.
With --expected-version N the touch happens only while the key is at
version N; otherwise it exits 1 and says the current version. A lock or
leader lease is renewed by its holder ('kvctl lock extend', 'kvctl
leader heartbeat'), not touched; a set, list or queue is refused too.

--format text prints "KEY expires at TIME (version N)", json the entry
after the touch, value the new expiry (RFC 3339; an empty line with
--persist).`,
		Example: `  kvctl touch tenant/acme/project/demo/session/42 --ttl 30m
  kvctl touch tenant/acme/project/demo/session/42 --ttl 30m --expected-version 7
  kvctl touch tenant/acme/project/demo/config/flags --persist
  kvctl touch tenant/acme/project/demo/session/42 --ttl 1h --request-id renew-42   # safe to repeat`,
	}, "write", func(cmd *cobra.Command, key string) error {
		r := client.TouchRequest{Key: key, Persist: persist, ExpectedVersion: w.expectedVersion(cmd), RequestID: w.requestID}
		if err := a.touchExpiry(&w, &r); err != nil {
			return err
		}
		res, err := a.client.Touch(cmd.Context(), r)
		if err != nil {
			return err
		}
		a.noteReplayed(res.Replayed, w.requestID, "touched")
		return a.printTouched(res.Entry)
	})
	w.add(cmd, writeUsage{
		expected:  "touch only if the key is at this version",
		ttl:       "the new expiry, from now: a duration (30s, 24h) or seconds",
		requestID: "idempotency id: repeating the touch with it is answered as a replay, and kvctl may retry it",
	})
	cmd.Flags().BoolVar(&persist, "persist", false, "remove the expiry: the key never expires")
	return cmd
}

// touchExpiry sets r's TTL from --ttl, which is given exactly when
// --persist is not.
func (a *app) touchExpiry(w *writeFlags, r *client.TouchRequest) error {
	switch {
	case r.Persist && w.ttl != "":
		return &usageError{msg: "--ttl and --persist both given", solution: "give --ttl for a new expiry, or --persist for none", cmd: a.cmdPath}
	case !r.Persist && w.ttl == "":
		return &usageError{msg: "touch needs --ttl or --persist", solution: "give the new expiry, e.g. --ttl 30s, or --persist to remove it", cmd: a.cmdPath}
	}
	var err error
	r.TTL, err = w.lease()
	return err
}

// printTouched writes the entry after a touch in a.format.
func (a *app) printTouched(e contract.Entry) error {
	switch {
	case a.format == formatJSON:
		return a.writeJSON(e)
	case a.format == formatValue && e.ExpiresAt == nil:
		_, err := fmt.Fprintln(a.stdout)
		return err
	case a.format == formatValue:
		_, err := fmt.Fprintln(a.stdout, e.ExpiresAt.Format(time.RFC3339Nano))
		return err
	case e.ExpiresAt == nil:
		_, err := fmt.Fprintf(a.stdout, "%s never expires (version %d)\n", printable(e.Key), e.Version)
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%s expires at %s (version %d)\n", printable(e.Key), e.ExpiresAt.Format(time.RFC3339), e.Version)
	return err
}
