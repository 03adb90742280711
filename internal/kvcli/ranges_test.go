package kvcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// seedPrefix writes n keys under prefix, contract.MaxTxnOps per
// transaction, each expiring after ttl seconds (0: never).
func seedPrefix(t *testing.T, c *client.Client, prefix string, n int, ttl int64) {
	t.Helper()
	for i := 0; i < n; i += contract.MaxTxnOps {
		var b contract.TxnBody
		for j := i; j < min(n, i+contract.MaxTxnOps); j++ {
			op := contract.TxnOp{Op: contract.OpPut, Key: fmt.Sprintf("%sk%05d", prefix, j), Value: json.RawMessage(`1`)}
			if ttl > 0 {
				op.TTLSeconds = &ttl
			}
			b.Ops = append(b.Ops, op)
		}
		if _, err := c.Txn(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeletePrefixAndCleanupExpired: kvctl delete --prefix deletes every
// key under a prefix (a held lock too) at once, refuses over 1000 keys
// with a Solution line naming --chunked, which then deletes them all;
// cleanup-expired counts and removes the due keys. The cases run in
// order.
func TestDeletePrefixAndCleanupExpired(t *testing.T) {
	t.Parallel()
	// The sweeper idle: cleanup-expired finds every due key.
	url := stack.MustRun(t, stack.WriterConfig(func(c *writer.Config) { c.SweepInterval = time.Hour })).URL
	c := client.New(url, stack.DevToken)
	ctx := t.Context()
	small, big, due := scope+"rdel/small/", scope+"rdel/big/", scope+"rdel/due/"
	seedPrefix(t, c, small, 5, 0)
	seedPrefix(t, c, big, 1200, 0)
	seedPrefix(t, c, due, 7, 1)
	seedPrefix(t, c, due+"later/", 3, 3600)
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: small + "lock", Holder: "ci", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond)
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"ErrKeyAndPrefix", []string{"delete", small + "k00000", "--prefix", small}, exitUsage, "", "KEY and --prefix both given"},
		{"ErrChunkedWithoutPrefix", []string{"delete", small + "k00000", "--chunked"}, exitUsage, "", "--chunked without --prefix"},
		{"ErrPrefixCondition", []string{"delete", "--prefix", small, "--expected-version", "1"}, exitUsage, "", "a range delete takes no condition"},
		{"ErrSpansProjects", []string{"delete", "--prefix", "tenant/acme/project/"}, exitUsage, "", "prefix must start with tenant/<tenant>/project/<project>/"},
		{"ErrReadOnlyToken", []string{"delete", "--prefix", small, "--token", stack.ReaderToken}, exitServer, "", "forbidden"},
		{"OKText", []string{"delete", "--prefix", small}, exitOK, "deleted 6 keys under " + small + "\n", ""},
		{"OKNoneLeft", []string{"delete", "--prefix", small, "-o", "value"}, exitOK, "0\n", ""},
		{"ErrTooMany", []string{"delete", "--prefix", big}, exitFailed, "", "Solution: add --chunked to delete them in chunks of 1000"},
		{"OKChunkedJSON", []string{"delete", "--prefix", big, "--chunked", "-o", "json"}, exitOK, `"count":1200,"calls":2}`, ""},
		{"OKCleanupExpired", []string{"cleanup-expired", due}, exitOK, "expired 7 keys under " + due + "\n", ""},
		{"OKCleanupNoneDue", []string{"cleanup-expired", due, "-o", "json"}, exitOK, `{"prefix":"` + due + `","count":0,"calls":1}`, ""},
		{"ErrCleanupArgs", []string{"cleanup-expired"}, exitUsage, "", "takes PREFIX"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(ctx, tc.args, func(k string) string { return env[k] }, stdio{strings.NewReader(""), &stdout, &stderr})
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.errs) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout with %q stderr with %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.errs)
			}
		})
	}
	for _, p := range []string{small, big, due} {
		want := map[string]int{due: 3}[p]
		if pg, err := c.ListKeys(ctx, client.ListOptions{Prefix: p}); err != nil || pg.Count != want {
			t.Fatalf("%s: %+v %v, want %d keys", p, pg, err, want)
		}
	}
}
