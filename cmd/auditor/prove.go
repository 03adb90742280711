package main

import (
	"bytes"
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
// the hash of X in the row's hash scheme, under the row's audit key, is
// the after_hash of the row (K, N), and the trail of K verifies against
// kv.changes (the row's chain hash recomputes and links to the key's later
// rows, up to the latest, which matches its event). A scheme-1 row cannot
// tell X from values whose numbers round to the same doubles: when X's
// own numbers do not survive that rounding, the claim is not proven. See
// docs/audit.md.
func prove(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs, c := newFlags("prove", stderr)
	// The arguments of one run: no variable sets them.
	arg := fs.Arguments()
	key := arg.String("key", "", "the KV key K (required)")
	version := arg.Int64("version", 0, "the version N (required)")
	value := arg.String("value", "", "the value X, JSON")
	valueFile := arg.String("value-file", "", "read the value X from this file (- for stdin) instead of -value")
	group, wait := groupFlag(fs), waitFlag(arg)
	if err := c.parse(fs, args); err != nil {
		return err
	}
	switch {
	case *key == "" || *version < 1:
		return errors.New("-key and -version (>= 1) are required")
	case (*value == "") == (*valueFile == ""):
		return errors.New("give the value with exactly one of -value and -value-file")
	}
	raw, err := readValue(*value, *valueFile)
	if err != nil {
		return err
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
	canon, err := checkValue(stdout, &row, k, raw, fail)
	if err != nil {
		return err
	}
	rep, err := audit.Verify(ctx, store, keys, audit.VerifyConfig{
		Brokers: c.kafka.BrokerList(), Kafka: c.kafka.Conn(), Topics: c.kafka.Topics(), Group: *group, Scope: audit.KeyScope(*key), Wait: *wait,
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

// readValue returns the value of -value, or of the file -value-file names.
func readValue(value, file string) (raw []byte, err error) {
	raw = []byte(value)
	switch file {
	case "":
	case "-":
		raw, err = io.ReadAll(os.Stdin)
	default:
		raw, err = os.ReadFile(file)
	}
	if err == nil && !json.Valid(raw) {
		err = errors.New("the value is not valid JSON")
	}
	return raw, err
}

// checkValue hashes raw as the row's scheme hashes the value of its key
// under k, prints what it compared, and fails unless the hash is the
// row's after_hash and, in scheme 1, raw's numbers are what scheme 1
// hashed. It returns raw's canonical form.
func checkValue(stdout io.Writer, row *audit.Row, k audit.HMACKey, raw []byte, fail func(problem, format string, args ...any) error) ([]byte, error) {
	s := row.HashScheme
	if !s.Valid() {
		return nil, fail(audit.ProblemUnknownScheme, "the row's hash_scheme %d is not a scheme this auditor computes (1 or 2)", s)
	}
	canon, ok := s.Canonical(raw)
	h := s.ValueHash(k, row.Key, raw)
	fmt.Fprintf(stdout, "value (hash scheme %d canonical form): %s\nHMAC-SHA256 under key %s: %s\nrow %s@%d: after_hash %s, %s %s by %s at %s\n",
		s, truncateValue(canon), k.ID, h, row.Key, row.Version, row.AfterHash, row.Kind, row.Op, row.Principal, row.TS.Format(time.RFC3339Nano))
	if h != row.AfterHash {
		return nil, fail("value_differs", "the value's hash %s is not the row's after_hash %s", h, row.AfterHash)
	}
	if s == audit.Scheme1 && ok {
		if exact, _ := audit.Scheme2.Canonical(raw); !bytes.Equal(exact, canon) {
			return nil, fail("value_ambiguous", "the row is hashed under scheme 1, which rounds numbers to doubles (and -0 to 0): "+
				"%s hashes like %s and every value with the same doubles, so the trail cannot tell which was stored", truncateValue(exact), truncateValue(canon))
		}
		fmt.Fprintln(stdout, "note: a scheme-1 row compares numbers as IEEE 754 doubles; values whose numbers round to these hash alike")
	}
	return canon, nil
}

func truncateValue(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
