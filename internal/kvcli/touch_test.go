package kvcli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/testenv/stack"
)

// TestTouch: kvctl touch gives a key a new expiry (or none) and keeps its
// value, prints it in each format, and explains each refusal with a
// Solution line. The cases run in order.
func TestTouch(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	ctx := t.Context()
	k, lock, set := scope+"touch/session", scope+"touch/lock", scope+"touch/agents"
	if _, err := c.Put(ctx, client.PutRequest{Key: k, Value: json.RawMessage(`{"user":"ann"}`), TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AcquireLock(ctx, client.LockRequest{Key: lock, Holder: "ci", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SAdd(ctx, client.SetRequest{Key: set, Member: "a"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"OKText", []string{k, "--ttl", "30m"}, exitOK, " expires at ", ""},
		{"OKJSONExpectedVersion", []string{k, "--ttl", "3600", "--expected-version", "2", "-o", "json"}, exitOK, `"value":{"user":"ann"},"version":3`, ""},
		{"OKPersistValue", []string{k, "--persist", "--format", "value"}, exitOK, "\n", ""},
		{"OKPersistText", []string{k, "--persist"}, exitOK, k + " never expires (version 5)\n", ""},
		{"ErrStale", []string{k, "--ttl", "1m", "--expected-version", "2"}, exitFailed, "", "[version_conflict, correlation id "},
		{"ErrMissing", []string{scope + "touch/missing", "--ttl", "1m"}, exitFailed, "", "Solution: a touch never creates a key"},
		{"ErrLockHeld", []string{lock, "--ttl", "1m"}, exitUnavailable, "", "Solution: " + lock + " is a lock: its holder renews the lease with 'kvctl lock extend"},
		{"ErrLockNamingVersion", []string{lock, "--ttl", "1m", "--expected-version", "1"}, exitFailed, "", "[wrong_type]\n\nSolution: " + lock + " is a lock"},
		{"ErrSet", []string{set, "--persist"}, exitFailed, "", "is a set: change it with the set commands"},
		{"ErrNeither", []string{k}, exitUsage, "", "Error: touch needs --ttl or --persist\n\nSolution: give the new expiry"},
		{"ErrBoth", []string{k, "--ttl", "1m", "--persist"}, exitUsage, "", "Solution: give --ttl for a new expiry, or --persist for none"},
		{"ErrBadTTL", []string{k, "--ttl", "1.5s"}, exitUsage, "", "is not a whole number of seconds"},
		{"ErrTTLOverMax", []string{k, "--ttl", "400000000"}, exitUsage, "", "--persist removes the expiry"},
		{"ErrReadOnlyToken", []string{k, "--ttl", "1m", "--token", stack.ReaderToken}, exitServer, "", `rights include "write"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(ctx, append([]string{"touch"}, tc.args...), func(k string) string { return env[k] }, stdio{strings.NewReader(""), &stdout, &stderr})
			if code != tc.code || !strings.Contains(stdout.String(), tc.stdout) || !strings.Contains(stderr.String(), tc.errs) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout with %q stderr with %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.errs)
			}
		})
	}
	if e, err := c.Get(ctx, k); err != nil || string(e.Value) != `{"user":"ann"}` || e.ExpiresAt != nil || e.Version != 5 {
		t.Fatalf("after the touches: %+v %v", e, err)
	}
}
