package kvcli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) watchCommand() *cobra.Command {
	var (
		o   client.WatchOptions
		key bool
	)
	cmd := &cobra.Command{
		Use:   "watch PREFIX",
		Short: "Print every change under a key prefix as it happens, until interrupted",
		Long: `Follow the changes of the keys under PREFIX (inside one project; or of one
key with --key) in log order: puts, deletes, expiries, collection and
transaction events, each with its version, op, value (absent on delete and
expire), time, principal and cursor. It runs until interrupted (Ctrl-C:
exit 0), reconnecting on its own after the last cursor it printed, so no
change is lost or printed twice across reconnections.

Without --from it starts with the changes that come next; --from CURSOR
resumes after the change whose cursor that was (exclusive). When the log
no longer holds what follows CURSOR (compaction), kvctl exits 1: list the
prefix again and watch from now.

--format json (and the default when stdout is not a terminal) prints one
JSON object per line: {"cursor","key","version","kind","op","value"?,
"time","principal",...}; text prints CURSOR KEY@VERSION KIND/OP VALUE;
value prints the value alone (null on a delete or expiry).`,
		Example: `  kvctl watch tenant/acme/project/demo/
  kvctl watch tenant/acme/project/demo/flags/ --format json | jq -c 'select(.kind=="put")'
  kvctl watch tenant/acme/project/demo/jobs/ --from p3.o1234
  kvctl watch --key tenant/acme/project/demo/config --format value`,
		Args:        cobra.ExactArgs(1),
		Annotations: perCallAnnotation,
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := a.key(args[0])
			if err != nil {
				return err
			}
			if key {
				o.Key = target
			} else {
				o.Prefix = target
			}
			a.subject, a.right = target, "read"
			for ev, err := range a.client.Watch(cmd.Context(), o) {
				if err != nil {
					return err
				}
				if err := a.writeWatchEvent(ev); err != nil {
					return err
				}
			}
			return nil // interrupted: the watch ends as asked
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.After, "from", "", "resume after this cursor (a printed change's cursor), exclusive")
	f.BoolVar(&key, "key", false, "watch the one key PREFIX names, not the keys under it")
	return cmd
}

// writeWatchEvent prints one change in the chosen format.
func (a *app) writeWatchEvent(ev contract.WatchEvent) error {
	switch a.format {
	case formatJSON:
		return writeJSON(a.stdout, ev)
	case formatValue:
		v := ev.Value
		if v == nil {
			v = []byte("null")
		}
		return writeValue(a.stdout, v)
	}
	value := printable(string(ev.Value))
	if ev.Element != nil {
		value = fmt.Sprintf("%s (element %s %s)", value, ev.Element.Op, printable(ev.Element.Member))
	}
	_, err := fmt.Fprintf(a.stdout, "%s %s@%d %s/%s %s\n", ev.Cursor, ev.Key, ev.Version, ev.Kind, ev.Op, value)
	return err
}
