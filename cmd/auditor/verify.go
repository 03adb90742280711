package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/eskv/eskv/audit"
)

// discrepancyError is a verification that ran and failed: exit code 2.
type discrepancyError struct {
	what  string // "verify failed", "not proven"
	first audit.Discrepancy
	n     int
}

// ExitCode is exitDiscrepancy.
func (e *discrepancyError) ExitCode() int { return exitDiscrepancy }

func (e *discrepancyError) Error() string {
	more := ""
	if e.n > 1 {
		more = fmt.Sprintf(" (and %d more discrepancies)", e.n-1)
	}
	return e.what + ": " + e.first.String() + more
}

// verify recomputes the hash chains in ClickHouse and matches rows and
// events; it exits 2 naming the first discrepancy.
func verify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := newFlags("verify", stderr)
	// The arguments of one run: no variable sets them.
	arg := fs.Arguments()
	tenant := arg.String("tenant", "", "verify the keys of this tenant only")
	prefix := arg.String("prefix", "", "verify the keys starting with this prefix only")
	key := arg.String("key", "", "verify this one key only")
	from := arg.String("from", "", "verify keys >= this key only")
	to := arg.String("to", "", "verify keys < this key only")
	group, wait := groupFlag(fs), waitFlag(arg)
	asJSON := arg.Bool("json", false, "print the report as JSON")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if (*tenant != "" && *prefix != "") || (*key != "" && (*tenant != "" || *prefix != "" || *from != "" || *to != "")) {
		return fmt.Errorf("-key, -tenant and -prefix exclude each other, and -key excludes -from and -to")
	}
	scope := audit.Scope{Prefix: *prefix, From: *from, To: *to}
	if *tenant != "" {
		scope.Prefix = audit.TenantScope(*tenant).Prefix
	}
	if *key != "" {
		scope = audit.KeyScope(*key)
	}
	keys, store, err := c.openTrail(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	rep, err := audit.Verify(ctx, store, keys, audit.VerifyConfig{
		Brokers: c.kafka.BrokerList(), Kafka: c.kafka.Conn(), Topics: c.kafka.Topics(), Group: *group, Scope: scope, Wait: *wait,
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		status := "OK"
		if len(rep.Discrepancies) > 0 {
			status = "FAILED"
		}
		fmt.Fprintf(stdout, "verify %s (%s): %d rows of %d keys; %d events in %s, %d pending (not committed by %s yet); "+
			"%d rows whose events were compacted away, %d chains starting after compaction; %d conflict records\n",
			status, rep.Scope, rep.Rows, rep.Keys, rep.Events, c.kafka.Topic, rep.Pending, *group, rep.Compacted, rep.ChainStarts, rep.Conflicts)
		for i, d := range rep.Discrepancies {
			if i == 20 {
				fmt.Fprintf(stdout, "  ... %d more\n", len(rep.Discrepancies)-i)
				break
			}
			fmt.Fprintf(stdout, "  %s\n", d)
		}
	}
	if len(rep.Discrepancies) > 0 {
		return &discrepancyError{what: "verify failed", first: rep.Discrepancies[0], n: len(rep.Discrepancies)}
	}
	return nil
}
