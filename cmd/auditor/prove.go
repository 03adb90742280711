package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/eskv/eskv/audit"
)

// prove checks the claim "value X was the value of key K at version N":
// the HMAC of X's canonical JSON under the row's key is the after_hash of
// the row (K, N), and the trail of K verifies against kv.changes (the
// row's chain hash recomputes and links to the key's later rows, up to the
// latest, which matches its event). See docs/audit.md.
func prove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := newFlags("prove", stderr)
	key := fs.String("key", "", "the KV key K (required)")
	version := fs.Int64("version", 0, "the version N (required)")
	value := fs.String("value", "", "the value X, JSON")
	valueFile := fs.String("value-file", "", "read the value X from this file (- for stdin) instead of -value")
	group, wait := groupFlag(fs), waitFlag(fs)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	switch {
	case *key == "" || *version < 1:
		return errors.New("-key and -version (>= 1) are required")
	case (*value == "") == (*valueFile == ""):
		return errors.New("give the value with exactly one of -value and -value-file")
	}
	raw := []byte(*value)
	if *valueFile != "" {
		var err error
		if *valueFile == "-" {
			raw, err = io.ReadAll(os.Stdin)
		} else {
			raw, err = os.ReadFile(*valueFile)
		}
		if err != nil {
			return err
		}
	}
	if !json.Valid(raw) {
		return errors.New("the value is not valid JSON")
	}
	keys, store, err := c.openTrail(ctx)
	if err != nil {
		return err
	}
	defer store.Close()

	fail := func(problem, format string, args ...any) error {
		return &discrepancyError{what: "not proven", n: 1, first: audit.Discrepancy{
			Key: *key, Version: *version, Problem: problem, Detail: fmt.Sprintf(format, args...)}}
	}
	row, ok, err := store.EventRowAt(ctx, *key, *version)
	if err != nil {
		return err
	}
	if !ok {
		return fail(audit.ProblemRowMissing, "the trail has no row for it")
	}
	k, ok := keys.Lookup(row.HashKeyID)
	if !ok {
		return fail(audit.ProblemUnknownKeyID, "the row is hashed under key id %q, which is not configured", row.HashKeyID)
	}
	canon, _ := audit.Canonical(raw)
	h := audit.ValueHash(k, raw)
	fmt.Fprintf(stdout, "value (RFC 8785): %s\nHMAC-SHA256 under key %s: %s\nrow %s@%d: after_hash %s, %s %s by %s at %s\n",
		truncateValue(canon), k.ID, h, row.Key, row.Version, row.AfterHash, row.Kind, row.Op, row.Principal, row.TS.Format(time.RFC3339Nano))
	if h != row.AfterHash {
		return fail("value_differs", "the value's hash %s is not the row's after_hash %s", h, row.AfterHash)
	}
	rep, err := audit.Verify(ctx, store, keys, audit.VerifyConfig{
		Brokers: c.kafka.BrokerList(), Topics: c.kafka.Topics(), Group: *group, Scope: audit.KeyScope(*key), Wait: *wait,
	})
	if err != nil {
		return err
	}
	if len(rep.Discrepancies) > 0 {
		d := rep.Discrepancies[0]
		return &discrepancyError{what: "not proven (the key's trail does not verify)", first: d, n: len(rep.Discrepancies)}
	}
	fmt.Fprintf(stdout, "PROVEN: %s was the value of %s at version %d: its hash is the row's after_hash, and the key's trail "+
		"verifies (%d rows, %d events in %s, %d rows whose events were compacted away)\n",
		truncateValue(canon), *key, *version, rep.Rows, rep.Events, c.kafka.Topic, rep.Compacted)
	return nil
}

func truncateValue(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
