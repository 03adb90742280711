package kvcli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// Reads of many keys: mget (a batch get), projects, and list --keys-only
// (listKeysOnly, called by list).

func (a *app) mgetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mget KEY...",
		Short: "Print the entries of several keys, read in one request",
		Long: `Print the current entries of several keys, of any projects, read in as
few requests as it takes (POST /v1/kv:batchGet, up to 1000 keys each).
Each key is read as 'kvctl get' reads it; a key may not be named twice.

--format text prints a table (KEY VERSION VALUE, the error code in VALUE
for a key without an entry), json {"items":[{"key","partition"?,"entry"?,
"error"?}...]}, value one stored value per line (null for a key without
an entry). Every key is printed; then kvctl exits 1 when a key is absent
(not_found), and 3 when the token may not read a key (forbidden) or its
partition could not be read (partition_unavailable).`,
		Example: `  kvctl mget tenant/acme/project/demo/a tenant/acme/project/web/b
  kvctl mget config/a config/b --table tenant/acme/project/demo --format value
  kvctl mget tenant/acme/project/demo/a tenant/acme/project/demo/b --format json | jq '.items[].entry.value'`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) == 0 {
				return &usageError{msg: "kvctl mget takes one KEY or more; got none", cmd: cmd.CommandPath()}
			}
			return nil
		},
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			keys := make([]string, len(args))
			for i, arg := range args {
				k, err := a.key(arg)
				if err != nil {
					return err
				}
				keys[i] = k
			}
			a.subject, a.right = strings.Join(keys, ", "), "read"
			items, err := a.client.GetMany(cmd.Context(), keys)
			if err != nil {
				return err
			}
			if err := writeItems(a.stdout, a.format, items); err != nil {
				return err
			}
			return itemsFailure(items)
		},
	}
}

// writeItems prints a batch get's items in format.
func writeItems(w io.Writer, format string, items []contract.BatchGetItem) error {
	switch format {
	case formatJSON:
		return writeJSON(w, struct {
			Items []contract.BatchGetItem `json:"items"`
		}{items})
	case formatValue:
		var b strings.Builder
		for _, it := range items {
			if it.Entry == nil {
				b.WriteString("null\n")
				continue
			}
			fmt.Fprintf(&b, "%s\n", it.Entry.Value)
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVERSION\tVALUE")
	for _, it := range items {
		if it.Entry == nil {
			fmt.Fprintf(tw, "%s\t-\t(%s)\n", printable(it.Key), printable(it.Error.Code))
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", printable(it.Key), it.Entry.Version, printable(string(it.Entry.Value)))
	}
	return tw.Flush()
}

// itemsFailure is mget's exit once its items are printed: nil when every
// key has an entry; else exit 3 when a key was forbidden or unavailable,
// 1 when keys were only absent, with what to do.
func itemsFailure(items []contract.BatchGetItem) error {
	var absent, denied, unavailable []string
	for _, it := range items {
		if it.Error == nil {
			continue
		}
		switch it.Error.Code {
		case contract.ENotFound:
			absent = append(absent, it.Key)
		case contract.EForbidden:
			denied = append(denied, it.Key)
		default:
			unavailable = append(unavailable, it.Key)
		}
	}
	switch {
	case len(denied) > 0:
		return &failure{code: exitServer, msg: fmt.Sprintf("the token may not read %d of the %d keys: %s [forbidden]", len(denied), len(items), shorten(strings.Join(denied, ", "))),
			solution: "use a token with a grant whose prefix covers those keys and whose rights include \"read\" (the server's tokens file, ESKV_TOKENS_FILE)"}
	case len(unavailable) > 0:
		return &failure{code: exitServer, msg: fmt.Sprintf("%d of the %d keys could not be read: %s [partition_unavailable]", len(unavailable), len(items), shorten(strings.Join(unavailable, ", "))),
			solution: "their partitions are moving between writers or catching up: run the command again in a few seconds"}
	case len(absent) > 0:
		return &failure{code: exitFailed, msg: fmt.Sprintf("%d of the %d keys do not exist: %s [not_found]", len(absent), len(items), shorten(strings.Join(absent, ", "))),
			solution: "check the keys (kvctl list PREFIX --keys-only lists a project's keys), or create them with 'kvctl set'"}
	}
	return nil
}

func (a *app) projectsCommand() *cobra.Command {
	var (
		o   client.ProjectsOptions
		all bool
	)
	cmd := &cobra.Command{
		Use:   "projects",
		Short: "List the projects the token may read, with their key counts",
		Long: `List the projects (tenant/<tenant>/project/<project>) the token may read
keys of, each with the number of its live keys the token may read, in key
order (GET /v1/projects). A project is listed once it holds such a key.
The counts are the projection's: a write acknowledged a moment before may
not be counted yet.

Without --all, one page of at most --limit projects (default 100) is
printed; when more follow, stderr says so and how to continue (--cursor).

--format text prints a table (TENANT PROJECT KEYS), json
{"items":[{"tenant","project","keys"}...],"count":N,"truncated":bool,
"nextCursor"?}, value one tenant/<tenant>/project/<project> per line.`,
		Example: `  kvctl projects
  kvctl projects --all --format value
  kvctl projects --format json | jq '.items[] | select(.keys > 1000)'`,
		Args:        cobra.NoArgs,
		Annotations: apiAnnotation,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a.subject, a.right = "the projects", "read"
			out, err := a.listProjects(cmd.Context(), o, all)
			if err != nil {
				return err
			}
			if err := writeProjects(a.stdout, a.format, out); err != nil {
				return err
			}
			if out.Truncated {
				fmt.Fprintf(a.stderr, "more projects follow: add --cursor %s for the next page, or --all for every project\n", printable(out.NextCursor))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Limit, "limit", 0, fmt.Sprintf("page size, 1 to %d (default %d)", contract.MaxProjectsLimit, contract.DefaultProjectsLimit))
	f.StringVar(&o.Cursor, "cursor", "", "start after this cursor (the nextCursor of the previous page)")
	f.BoolVar(&all, "all", false, "print every project, fetching every page")
	return cmd
}

// listProjects fetches one page of the projects, or with all every page.
func (a *app) listProjects(ctx context.Context, o client.ProjectsOptions, all bool) (contract.ProjectsAnswer, error) {
	out, err := a.client.Projects(ctx, o)
	for all && err == nil && out.Truncated {
		o.Cursor = out.NextCursor
		var next contract.ProjectsAnswer
		if next, err = a.client.Projects(ctx, o); err == nil {
			next.Items = append(out.Items, next.Items...)
			out = next
		}
	}
	out.Count = len(out.Items)
	return out, err
}

// writeProjects prints the projects in format.
func writeProjects(w io.Writer, format string, p contract.ProjectsAnswer) error {
	switch format {
	case formatJSON:
		return writeJSON(w, p)
	case formatValue:
		var b strings.Builder
		for _, it := range p.Items {
			fmt.Fprintf(&b, "%s\n", printable(it.Scope()))
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if len(p.Items) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tPROJECT\tKEYS")
	for _, it := range p.Items {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", printable(it.Tenant), printable(it.Project), it.Keys)
	}
	return tw.Flush()
}

// listKeysOnly fetches a keys-only listing of o (one page, or with all
// every page) and prints it: text KEY VERSION PURPOSE EXPIRES, json the
// page as the API answers it, keys one key per line; at (--at) reads the
// past.
func (a *app) listKeysOnly(ctx context.Context, o client.ListOptions, all bool, at string) error {
	if a.format == formatValue {
		return &usageError{msg: "--keys-only lists no values: --format value has nothing to print", solution: "use --format text, json or keys with --keys-only", cmd: a.cmdPath}
	}
	opts, err := atOption(at, a.cmdPath)
	if err != nil {
		return err
	}
	var out contract.KeysAnswer
	if !all {
		out, err = a.client.ListKeys(ctx, o, opts...)
	} else {
		out.Items = []contract.KeyInfo{}
		for k, kerr := range a.client.ListKeysAll(ctx, o, opts...) {
			if err = kerr; err != nil {
				break
			}
			out.Items = append(out.Items, k)
		}
	}
	if err != nil {
		return err
	}
	out.Count = len(out.Items)
	if err := writeKeys(a.stdout, a.format, out); err != nil {
		return err
	}
	a.noteListing(contract.ListAnswer{Count: out.Count, Truncated: out.Truncated, NextCursor: out.NextCursor}, o.Prefix, "")
	return nil
}

// writeKeys prints a keys-only listing in format.
func writeKeys(w io.Writer, format string, k contract.KeysAnswer) error {
	switch format {
	case formatJSON:
		return writeJSON(w, k)
	case formatKeys:
		var b strings.Builder
		for _, it := range k.Items {
			fmt.Fprintf(&b, "%s\n", printable(it.Key))
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	if len(k.Items) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tVERSION\tPURPOSE\tEXPIRES")
	for _, it := range k.Items {
		exp := "-"
		if it.ExpiresAt != nil {
			exp = timeText(*it.ExpiresAt)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", printable(it.Key), it.Version, printable(it.Purpose), exp)
	}
	return tw.Flush()
}
