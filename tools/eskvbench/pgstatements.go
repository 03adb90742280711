package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"
)

// What each Postgres statement of eskv's stack costs per acknowledged
// write over figure 18a's first run, from pg_stat_statements (loaded by
// the bench's own cluster, -postgres own): the statements of the stack's
// database, the most expensive first.

// pgStatement is one statement's share of a run.
type pgStatement struct {
	Query          string  `json:"query"`
	Calls          int64   `json:"calls"`
	Rows           int64   `json:"rows"`
	ExecMillis     float64 `json:"execMs"`
	CallsPerWrite  float64 `json:"callsPerWrite"`
	MicrosPerWrite float64 `json:"execMicrosPerWrite"`
}

// pgStatementsTop is how many statements are printed.
const pgStatementsTop = 8

// resetStatements empties pg_stat_statements; false when the view is not
// there (a cluster without the extension: nothing is printed).
func resetStatements(ctx context.Context, db *pgxpool.Pool) bool {
	if db == nil {
		return false
	}
	_, err := db.Exec(ctx, "SELECT pg_stat_statements_reset()")
	return err == nil
}

// readStatements reads the statements of db's database since the reset,
// each per acknowledged write.
func readStatements(ctx context.Context, db *pgxpool.Pool, writes int) ([]pgStatement, error) {
	rows, err := db.Query(ctx, `SELECT query, calls, rows, total_exec_time FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT $1`, pgStatementsTop)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []pgStatement
	for rows.Next() {
		var s pgStatement
		if err := rows.Scan(&s.Query, &s.Calls, &s.Rows, &s.ExecMillis); err != nil {
			return nil, err
		}
		if writes > 0 {
			s.CallsPerWrite = float64(s.Calls) / float64(writes)
			s.MicrosPerWrite = s.ExecMillis * 1e3 / float64(writes)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// printStatements prints the statements under figure 18.
func printStatements(w io.Writer, stmts []pgStatement) error {
	if len(stmts) == 0 {
		return nil
	}
	fmt.Fprintln(w, "    eskv's Postgres statements over 18a's first run (pg_stat_statements: calls, and execution time as wall-clock time, waits included), per acknowledged write:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    calls/write\tµs/write\trows/call\tstatement")
	for _, s := range stmts {
		q := strings.Join(strings.Fields(s.Query), " ")
		if len(q) > 110 {
			q = q[:110] + "…"
		}
		fmt.Fprintf(tw, "    %.3f\t%.1f\t%.1f\t%s\n", s.CallsPerWrite, s.MicrosPerWrite, float64(s.Rows)/max(float64(s.Calls), 1), q)
	}
	return tw.Flush()
}
