package kvcli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Writes of a prefix: delete --prefix (POST /v1/kv:deleteRange) and
// cleanup-expired (POST /v1/kv:expireDue).

// deletePrefixHelp ends delete's help: its --prefix form.
const deletePrefixHelp = `

With --prefix PREFIX (in place of KEY) every key under PREFIX is deleted,
whatever it holds (etcd's del --prefix): a lock or a leadership is
broken as a delete naming its version breaks it, a set, list or queue
goes whole. PREFIX lies inside one project and the token needs the write
right on all of it. Up to 1000 keys go in one transaction (watchers see
one txnId); over that the command deletes nothing and exits 1, unless
--chunked deletes them in chunks of 1000, each atomic, until none is
left. --format text prints "deleted N keys under PREFIX", json
{"prefix","count","calls","txnId"?}, value the count.`

// rangeFlags are delete's flags of a range delete.
type rangeFlags struct {
	prefix  string
	chunked bool
}

// prefixAnswer is what delete --prefix and cleanup-expired print as
// json: the prefix, the keys removed and in how many calls.
type prefixAnswer struct {
	Prefix string `json:"prefix"`
	Count  int    `json:"count"`
	Calls  int    `json:"calls"`
	// TxnID is the transaction of an atomic range delete.
	TxnID string `json:"txnId,omitempty"`
}

// withPrefix makes delete take --prefix PREFIX (and --chunked) in place
// of KEY: the key's run is kept for KEY.
func (a *app) withPrefix(cmd *cobra.Command, rf *rangeFlags) {
	keyRun, keyArgs := cmd.RunE, cmd.Args
	cmd.Args = func(cmd *cobra.Command, got []string) error {
		if rf.prefix == "" {
			return keyArgs(cmd, got)
		}
		if len(got) > 0 {
			return &usageError{msg: "KEY and --prefix both given", solution: "give a KEY to delete one key, or --prefix to delete every key under it", cmd: cmd.CommandPath()}
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if rf.prefix == "" {
			if rf.chunked {
				return &usageError{msg: "--chunked without --prefix", solution: "--chunked deletes a prefix in chunks: give --prefix", cmd: a.cmdPath}
			}
			return keyRun(cmd, args)
		}
		for _, f := range []string{"expected-version", "if-value", "request-id"} {
			if cmd.Flags().Changed(f) {
				return &usageError{msg: "--" + f + " and --prefix both given", solution: "a range delete takes no condition: leave out --" + f, cmd: a.cmdPath}
			}
		}
		return a.deletePrefix(cmd, rf)
	}
	f := cmd.Flags()
	f.StringVar(&rf.prefix, "prefix", "", fmt.Sprintf("delete every key under this prefix instead of KEY: atomically, up to %d keys", contract.MaxRangeKeys))
	f.BoolVar(&rf.chunked, "chunked", false, fmt.Sprintf("with --prefix: delete in chunks of up to %d keys, each atomic, until none is left", contract.MaxRangeKeys))
}

// deletePrefix runs delete --prefix.
func (a *app) deletePrefix(cmd *cobra.Command, rf *rangeFlags) error {
	p, err := a.listPrefix(nil, rf.prefix)
	if err != nil {
		return err
	}
	a.subject, a.right = p, "write"
	out := prefixAnswer{Prefix: p}
	r := client.DeleteRangeRequest{Prefix: p, Chunked: rf.chunked}
	for {
		res, err := a.client.DeleteRange(cmd.Context(), r)
		if contract.ErrorCode(err) == contract.ETooManyKeys {
			return &failure{code: exitFailed, msg: fmt.Sprintf("more than %d keys lie under %s; nothing was deleted", contract.MaxRangeKeys, p),
				solution: fmt.Sprintf("add --chunked to delete them in chunks of %d (each atomic, the whole not), or delete under longer prefixes", contract.MaxRangeKeys)}
		}
		if err != nil {
			return a.partly(err, out, "deleted")
		}
		out.Count, out.Calls, out.TxnID = out.Count+res.Count, out.Calls+1, res.TxnID
		if !res.Truncated {
			break
		}
		r.Cursor = res.NextCursor
	}
	if out.Calls > 1 {
		out.TxnID = ""
	}
	return a.printPrefix(out, "deleted")
}

func (a *app) cleanupExpiredCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "cleanup-expired PREFIX",
		Short: "Expire now the keys under a prefix that are past their expiry",
		Long: fmt.Sprintf(`Expire now every key under PREFIX whose expiry has passed, as the TTL
sweeper would a little later: each gets the sweeper's expire event (kind
expire), in calls of up to %d keys. Keys not yet due, and keys without
an expiry, are left alone; the sweeper goes on on its own. It needs the
write right on every key under PREFIX, which lies inside one project.

--format text prints "expired N keys under PREFIX", json
{"prefix","count","calls"}, value the count.`, contract.MaxRangeKeys),
		Example: `  kvctl cleanup-expired tenant/acme/project/demo/sessions/
  kvctl cleanup-expired sessions/ --table tenant/acme/project/demo --format value`,
		Args:              args("PREFIX"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.listPrefix(args, "")
			if err != nil {
				return err
			}
			a.subject, a.right = p, "write"
			out := prefixAnswer{Prefix: p}
			for cursor := ""; ; {
				res, err := a.client.ExpireDue(cmd.Context(), p, cursor)
				if err != nil {
					return a.partly(err, out, "expired")
				}
				out.Count, out.Calls, cursor = out.Count+res.Count, out.Calls+1, res.NextCursor
				if !res.Truncated {
					return a.printPrefix(out, "expired")
				}
			}
		},
	}
}

// partly says on stderr how many keys the calls before err removed, when
// any did, and returns err.
func (a *app) partly(err error, out prefixAnswer, verb string) error {
	if out.Count > 0 {
		fmt.Fprintf(a.stderr, "%s %d keys under %s before the error\n", verb, out.Count, printable(out.Prefix))
	}
	return err
}

// printPrefix writes a prefix write's outcome in a.format.
func (a *app) printPrefix(out prefixAnswer, verb string) error {
	switch a.format {
	case formatJSON:
		return writeJSON(a.stdout, out)
	case formatValue:
		_, err := fmt.Fprintln(a.stdout, out.Count)
		return err
	}
	_, err := fmt.Fprintf(a.stdout, "%s %d keys under %s\n", verb, out.Count, printable(out.Prefix))
	return err
}
