package kvcli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) historyCommand() *cobra.Command {
	var (
		o   client.HistoryOptions
		all bool
	)
	cmd := a.keyCommand(&cobra.Command{
		Use:   "history KEY",
		Short: "Print a key's versions, oldest first",
		Long: `Print the versions of KEY, oldest first: each version's number, time,
op, the principal that wrote it and the value it left (none after a
delete or an expire). A key's history goes on across a delete and a
re-create (versions never go back); the server's history retention
(ESKV_HISTORY_RETENTION) may have removed older versions, never the
newest. A key never written exits 1. The read is as fresh as get's.

Without --all, one page of at most --limit versions (default 100) from
--from-version (default 1) is printed; when more follow, stderr says so
and how to continue (--cursor). With --all, every version is printed,
fetched in pages of --limit.

--format text prints a table (VERSION TIME OP PRINCIPAL VALUE; VALUE is
"(deleted)" or "(expired)" when the version left the key absent, and a
collection's element change, such as "add agent-1", for its element
events), json {"key","versions":[version...],"cursor"?} with each version
as the API answers it (version, kind, op, value?, principal, requestId?,
ts, txnId?, element?), value one value per version and line (an empty
line for a version without one).`,
		Example: `  kvctl history tenant/acme/project/demo/greeting
  kvctl history greeting --table tenant/acme/project/demo --from-version 10 --limit 5
  kvctl history tenant/acme/project/demo/greeting --all --format json | jq -c '.versions[] | [.version, .principal]'`,
	}, "read", func(cmd *cobra.Command, key string) error {
		if o.Limit < 0 || o.Limit > contract.MaxListLimit {
			return &usageError{msg: fmt.Sprintf("--limit must be between 1 and %d", contract.MaxListLimit), cmd: a.cmdPath}
		}
		if o.FromVersion < 0 {
			return &usageError{msg: "--from-version must be at least 1", cmd: a.cmdPath}
		}
		out := contract.HistoryAnswer{Key: key, Versions: []contract.HistoryVersion{}}
		for {
			page, err := a.client.HistoryPage(cmd.Context(), key, o)
			if err != nil {
				return err
			}
			out.Versions = append(out.Versions, page.Versions...)
			out.Cursor, o.Cursor = page.Cursor, page.Cursor
			if !all || o.Cursor == "" {
				break
			}
		}
		if err := writeHistory(a.stdout, a.format, out); err != nil {
			return err
		}
		if out.Cursor != "" {
			fmt.Fprintf(a.stderr, "more versions follow: add --cursor %s for the next page, or --all for every version\n", printable(out.Cursor))
		}
		return nil
	})
	f := cmd.Flags()
	f.Int64Var(&o.FromVersion, "from-version", 0, "the first version to print (default 1)")
	f.IntVar(&o.Limit, "limit", 0, fmt.Sprintf("page size, 1 to %d (default %d)", contract.MaxListLimit, contract.DefaultListLimit))
	f.StringVar(&o.Cursor, "cursor", "", "continue from this cursor (the cursor of the previous page)")
	f.BoolVar(&all, "all", false, "print every version, fetching every page")
	return cmd
}

// writeHistory prints a key's versions in format.
func writeHistory(w io.Writer, format string, h contract.HistoryAnswer) error {
	switch format {
	case formatJSON:
		return writeJSON(w, h)
	case formatValue:
		for _, v := range h.Versions {
			if _, err := fmt.Fprintf(w, "%s\n", v.Value); err != nil {
				return err
			}
		}
		return nil
	}
	if len(h.Versions) == 0 {
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERSION\tTIME\tOP\tPRINCIPAL\tVALUE")
	for _, v := range h.Versions {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", v.Version, v.TS.UTC().Format(historyTime), v.Op, printable(v.Principal), printable(versionText(v)))
	}
	return tw.Flush()
}

// versionText is the VALUE column of a version in text: its element
// change for a collection's element event, the value it left, or why
// there is none.
func versionText(v contract.HistoryVersion) string {
	switch {
	case v.Element != nil && v.Element.Value != nil:
		return v.Element.Op + " " + string(v.Element.Value) // a list's: the member is a position
	case v.Element != nil:
		return v.Element.Op + " " + v.Element.Member
	case v.Kind == contract.KindDelete:
		return "(deleted)"
	case v.Kind == contract.KindExpire:
		return "(expired)"
	}
	return string(v.Value)
}

// historyTime is the TIME column's layout: RFC 3339 in UTC to the
// microsecond (what the history stores), always as wide.
const historyTime = "2006-01-02T15:04:05.000000Z"
