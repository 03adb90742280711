package kvcli

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// listFlags are list's flags.
type listFlags struct {
	prefix   string
	o        client.ListOptions
	all      bool
	where    string
	keysOnly bool
	at       string
}

func (a *app) listCommand() *cobra.Command {
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list [PREFIX]",
		Short: "List live entries under a key prefix",
		Long: `List the live entries whose key starts with PREFIX (or --prefix), in
bytewise key order. The prefix starts with tenant/<tenant>/project/<project>/,
or is a path in the namespace (--table); without PREFIX, the namespace is
listed whole.

Without --all, one page of at most --limit entries (default 100) is
printed; when more follow, stderr says so and how to continue (--cursor).
With --all, every entry is printed, fetched in pages of --limit.

--where 'FIELD OP VALUE' keeps only the entries whose object value has the
top-level FIELD comparing as OP (eq, ne, lt, lte, gt, gte) with VALUE,
which is JSON when it parses as JSON and a string otherwise; the server
answers from the index of a field the project declares ('kvctl indexes'),
else by reading a bounded number of values per page, which may then hold
fewer entries than --limit, or none, with a cursor (--all follows the
cursors; see GET /v1/kv in the API). An entry without the
field, or with another JSON type there, does not match. Timestamps compare
correctly as strings in one fixed RFC 3339 UTC form.

--format text prints a table (KEY VERSION PURPOSE VALUE), json
{"items":[entry...],"count":N,"truncated":bool,"nextCursor"?}, value one
stored value per line, keys one key per line (the seed's --format keys).
A listing sees every write acknowledged before
it was sent.

--keys-only lists the keys without their values (GET /v1/kv?keysOnly=true):
text prints KEY VERSION PURPOSE EXPIRES, json
{"items":[{"key","version","purpose","expiresAt"?}...],"count":N,
"truncated":bool,"nextCursor"?}, keys one key per line; pages hold up to
--limit 10000 keys (default 1000). It takes no --where.

--at POSITION|TIME lists the entries (or keys) as they were at a point of
the past (see get --at); a page's --cursor carries the position its
listing is read at, and continues it there when given with the same
--at. --where cannot be combined with it
(only current values are indexed by field).`,
		Example: `  kvctl list tenant/acme/project/demo/
  kvctl list tenant/acme/project/demo/jobs/ --all --format json | jq -r '.items[].key'
  kvctl list --prefix tenant/acme/project/demo/ --limit 10
  kvctl list tenant/acme/project/demo/ --limit 10 --cursor dGVuYW50L2FjbWUvcHJvamVjdC9kZW1vL2E
  kvctl list --table tenant/acme/project/demo --limit 100 --format keys
  kvctl list tenant/acme/project/demo/jobs/ --where 'state eq failed' --all
  kvctl list tenant/acme/project/demo/ --keys-only --all --format keys
  kvctl list tenant/acme/project/demo/jobs/ --where "updated_at lt $(date -u -d '-5 min' +%Y-%m-%dT%H:%M:%SZ)" --format json
  kvctl list tenant/acme/project/demo/jobs/ --at 2026-03-04T09:00:00Z --all`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) > 1 {
				return &usageError{msg: fmt.Sprintf("kvctl list takes at most one PREFIX; got %d arguments", len(got)), cmd: cmd.CommandPath()}
			}
			return nil
		},
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE:              func(cmd *cobra.Command, args []string) error { return a.runList(cmd.Context(), args, &lf) },
	}
	f := cmd.Flags()
	f.StringVar(&lf.prefix, "prefix", "", "key prefix (the same as PREFIX)")
	f.IntVar(&lf.o.Limit, "limit", 0, fmt.Sprintf("page size, 1 to %d (default %d; with --keys-only 1 to %d, default %d)",
		contract.MaxListLimit, contract.DefaultListLimit, contract.MaxKeysLimit, contract.DefaultKeysLimit))
	f.StringVar(&lf.o.Cursor, "cursor", "", "start after this cursor (the nextCursor of the previous page)")
	f.BoolVar(&lf.all, "all", false, "print every entry, fetching every page")
	f.BoolVar(&lf.keysOnly, "keys-only", false, "list keys with their version, purpose and expiry, without values")
	f.StringVar(&lf.where, "where", "", "keep entries whose top-level FIELD compares as OP with VALUE: 'FIELD OP VALUE', OP one of "+filterOps())
	f.StringVar(&lf.at, "at", "", "list the past: a position (p<partition>.o<offset>, a watch cursor) or an RFC 3339 time")
	return cmd
}

// runList runs list with its arguments and flags.
func (a *app) runList(ctx context.Context, args []string, lf *listFlags) error {
	o := lf.o
	var err error
	if o.Prefix, err = a.listPrefix(args, lf.prefix); err != nil {
		return err
	}
	a.subject, a.right = o.Prefix, "read"
	if lf.keysOnly {
		if lf.where != "" {
			return &usageError{msg: "--keys-only takes no --where", solution: "leave out --where, or --keys-only to filter the entries", cmd: a.cmdPath}
		}
		return a.listKeysOnly(ctx, o, lf.all, lf.at)
	}
	out, err := a.listEntries(ctx, o, lf.where, lf.all, lf.at)
	if err != nil {
		return err
	}
	if err := writeList(a.stdout, a.format, out); err != nil {
		return err
	}
	a.noteListing(out, o.Prefix, lf.where)
	return nil
}

// listPrefix is the listing's prefix: PREFIX (args) or --prefix (flag),
// resolved in the namespace; the namespace itself when neither is given.
func (a *app) listPrefix(args []string, flag string) (string, error) {
	p := flag
	if len(args) == 1 {
		if flag != "" && flag != args[0] {
			return "", &usageError{msg: "PREFIX and --prefix differ", solution: "give the prefix once", cmd: a.cmdPath}
		}
		p = args[0]
	}
	switch {
	case p == "" && a.ns.project == "":
		return "", &usageError{msg: "no prefix given", solution: "give a prefix such as tenant/acme/project/demo/, or a namespace (--table, KVSTORE_TABLE) to list it whole", cmd: a.cmdPath}
	case p == "":
		return a.ns.project + "/", nil
	}
	return a.key(p)
}

// noteListing says on stderr how to go on after a truncated page, or that
// a text listing found nothing.
func (a *app) noteListing(out contract.ListAnswer, prefix, where string) {
	switch {
	case out.Truncated:
		fmt.Fprintf(a.stderr, "more entries follow: add --cursor %s for the next page, or --all for every entry\n", printable(out.NextCursor))
	case out.Count == 0 && a.format == formatText && where != "":
		fmt.Fprintf(a.stderr, "no entries under %s match %s\n", printable(prefix), printable(where))
	case out.Count == 0 && a.format == formatText:
		fmt.Fprintf(a.stderr, "no entries under %s\n", printable(prefix))
	}
}

// listEntries fetches one page of the listing o, filtered by where when
// it is given, or with all every page; at (--at) reads the past. The
// answer's position is the listing's (every page of one listing answers
// its first page's).
func (a *app) listEntries(ctx context.Context, o client.ListOptions, where string, all bool, at string) (contract.ListAnswer, error) {
	opts, err := atOption(at, a.cmdPath)
	if err != nil {
		return contract.ListAnswer{}, err
	}
	if where != "" && at != "" {
		return contract.ListAnswer{}, &usageError{msg: "--where cannot be combined with --at", solution: "list with --at and filter the entries yourself", cmd: a.cmdPath}
	}
	page := func(cursor string) (client.ListPage, error) {
		o.Cursor = cursor
		return a.client.List(ctx, o, opts...)
	}
	if where != "" {
		f, err := parseWhere(where, a.cmdPath)
		if err != nil {
			return contract.ListAnswer{}, err
		}
		so := client.ScanOptions{Prefix: o.Prefix, Filter: f, Limit: o.Limit}
		page = func(cursor string) (client.ListPage, error) {
			so.Cursor = cursor
			return a.client.Scan(ctx, so)
		}
	}
	if !all {
		out, err := page(o.Cursor)
		out.Count = len(out.Items)
		return out, err
	}
	out := contract.ListAnswer{Items: []contract.Entry{}}
	for cursor := o.Cursor; ; {
		p, err := page(cursor)
		if err != nil {
			return out, err
		}
		out.Items = append(out.Items, p.Items...)
		out.Position = cmp.Or(out.Position, p.Position)
		if !p.Truncated || p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	out.Count = len(out.Items)
	return out, nil
}

// parseWhere reads --where 'FIELD OP VALUE'; VALUE is the rest of the
// text, JSON when it parses as JSON, else a string.
func parseWhere(s, cmdPath string) (client.Filter, error) {
	bad := func(msg string) error {
		return &usageError{msg: "--where " + msg, solution: "write --where 'FIELD OP VALUE', e.g. --where 'state eq failed' or --where 'attempt gt 3' (OP: " + filterOps() + ")", cmd: cmdPath}
	}
	fields := strings.Fields(s)
	if len(fields) < 3 {
		return client.Filter{}, bad(fmt.Sprintf("%q needs a field, an operator and a value", s))
	}
	op := contract.FilterOp(fields[1])
	if !op.Valid() {
		return client.Filter{}, bad(fmt.Sprintf("operator %q is not one of %s", fields[1], filterOps()))
	}
	rest := strings.TrimSpace(s)
	rest = strings.TrimSpace(strings.TrimPrefix(rest, fields[0]))
	rest = strings.TrimSpace(strings.TrimPrefix(rest, fields[1]))
	v := fieldValue(rest)
	if v[0] == '{' || v[0] == '[' {
		return client.Filter{}, bad(fmt.Sprintf("value %s is an object or array; compare with a string, number, true, false or null", rest))
	}
	return client.Filter{Field: fields[0], Op: op, Value: v}, nil
}

// filterOps lists the --where operators: "eq ne lt lte gt gte".
func filterOps() string {
	s := make([]string, len(contract.FilterOps))
	for i, o := range contract.FilterOps {
		s[i] = string(o)
	}
	return strings.Join(s, " ")
}
