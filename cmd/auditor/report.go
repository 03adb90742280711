package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/eskv/eskv/audit"
)

// reportOutput is the JSON form of a report.
type reportOutput struct {
	From    time.Time            `json:"from"`
	To      time.Time            `json:"to"`
	Bucket  audit.Bucket         `json:"bucket"`
	Rates   []audit.Rate         `json:"rates"`
	TopKeys []audit.KeyConflicts `json:"topKeys,omitempty"`
	Alerts  []audit.Alert        `json:"alerts,omitempty"`
}

// report prints conflict rates per bucket, tenant, project and purpose,
// the top conflicting keys and the alerts of the range.
func report(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := newFlags("report", stderr)
	// The arguments of one run: no variable sets them.
	arg := fs.Arguments()
	by := arg.String("by", "minute", "bucket: minute, hour or total")
	since := arg.Duration("since", time.Hour, "report the last this long (ignored with -from)")
	fromS := arg.String("from", "", "start of the range, RFC 3339 (default now - since)")
	toS := arg.String("to", "", "end of the range, RFC 3339, exclusive (default now)")
	tenant := arg.String("tenant", "", "only this tenant")
	project := arg.String("project", "", "only this project")
	purpose := arg.String("purpose", "", "only this purpose")
	top := arg.Int("top", 10, "also list the N keys with the most conflicts (0: none)")
	asJSON := fs.Scope("ESKV_REPORT").Bool("json", false, "print JSON instead of tables")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	bucket := audit.Bucket(*by)
	switch bucket {
	case audit.Minute, audit.Hour, audit.Total:
	default:
		return fmt.Errorf("-by must be minute, hour or total, got %q", *by)
	}
	to := time.Now().UTC().Add(time.Second).Truncate(time.Second)
	if *toS != "" {
		t, err := time.Parse(time.RFC3339, *toS)
		if err != nil {
			return fmt.Errorf("-to: %w", err)
		}
		to = t.UTC()
	}
	from := to.Add(-*since)
	if *fromS != "" {
		t, err := time.Parse(time.RFC3339, *fromS)
		if err != nil {
			return fmt.Errorf("-from: %w", err)
		}
		from = t.UTC()
	}
	if !from.Before(to) {
		return fmt.Errorf("empty range: from %s is not before to %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}

	store, err := c.open(ctx, nil)
	if err != nil {
		return err
	}
	defer store.Close()
	out := reportOutput{From: from, To: to, Bucket: bucket}
	if out.Rates, err = store.ConflictRates(ctx, audit.RateQuery{
		From: from, To: to, Bucket: bucket, Tenant: *tenant, Project: *project, Purpose: *purpose,
	}); err != nil {
		return err
	}
	if *top > 0 {
		if out.TopKeys, err = store.TopConflictingKeys(ctx, from, to, *tenant, *top); err != nil {
			return err
		}
	}
	if out.Alerts, err = store.Alerts(ctx, from); err != nil {
		return err
	}
	if out.Rates == nil {
		out.Rates = []audit.Rate{}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return printReport(stdout, &out)
}

func printReport(w io.Writer, out *reportOutput) error {
	fmt.Fprintf(w, "conflict rate = conflicts / (conflicts + applied writes), per %s, %s to %s\n\n",
		out.Bucket, out.From.Format(time.RFC3339), out.To.Format(time.RFC3339))
	rows := []string{"BUCKET\tTENANT\tPROJECT\tPURPOSE\tAPPLIED\tCONFLICTS\tRATE"}
	for _, r := range out.Rates {
		rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%d\t%d\t%.1f%%", r.Bucket.Format("2006-01-02T15:04Z"), r.Tenant, r.Project, r.Purpose,
			r.Applied, r.Conflicts, 100*r.Rate))
	}
	if len(out.Rates) == 0 {
		rows = append(rows, "(no writes in the range)")
	}
	if err := printTable(w, rows); err != nil {
		return err
	}
	if len(out.TopKeys) > 0 {
		fmt.Fprintln(w, "\ntop conflicting keys")
		rows = []string{"KEY\tCONFLICTS\tLAST\tPURPOSES"}
		for _, k := range out.TopKeys {
			rows = append(rows, fmt.Sprintf("%s\t%d\t%s\t%s", k.Key, k.Conflicts, k.LastConflict.Format(time.RFC3339), strings.Join(k.Purposes, ",")))
		}
		if err := printTable(w, rows); err != nil {
			return err
		}
	}
	if len(out.Alerts) > 0 {
		fmt.Fprintln(w, "\nconflict-rate alerts")
		rows = []string{"AT\tTENANT\tPROJECT\tPURPOSE\tSTATE\tRATE\tWINDOW"}
		for _, a := range out.Alerts {
			rows = append(rows, fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%.1f%%\t%s", a.At.Format(time.RFC3339), a.Group.Tenant, a.Group.Project,
				a.Group.Purpose, a.State, 100*a.Rate, a.Window))
		}
		return printTable(w, rows)
	}
	return nil
}

// printTable writes rows of tab-separated cells as aligned columns.
func printTable(w io.Writer, rows []string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, r)
	}
	return tw.Flush()
}
