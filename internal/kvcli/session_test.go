package kvcli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv/stack"
)

// TestSession: kvctl session create, set --session, get, keepalive and
// revoke, in order: the revoke deletes the attached key, and an ended
// session exits 1.
func TestSession(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	ctx := t.Context()
	s, k := scope+"sessions/cli", scope+"services/cli/1"
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_FORMAT": formatText}
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"OKCreate", []string{"session", "create", s, "--ttl", "30s"}, exitOK, s + " expires at ", ""},
		{"ErrCreateNoTTL", []string{"session", "create", s + "2"}, exitUsage, "", "session create needs --ttl"},
		{"ErrCreateTwice", []string{"session", "create", s, "--ttl", "30s"}, exitFailed, "", "version_conflict"},
		{"OKSetAttached", []string{"set", k, `{"addr":"10.0.0.1:80"}`, "--session", s}, exitOK, k + " version 1\n", ""},
		{"OKGet", []string{"session", "get", s, "-o", "json"}, exitOK, `"attached":[{"key":"` + k + `","version":1}]`, ""},
		{"OKKeepAlive", []string{"session", "keepalive", s}, exitOK, "1 attached", ""},
		{"OKRevoke", []string{"session", "revoke", s}, exitOK, s + " revoked: 1 keys ended\n", ""},
		{"ErrKeyGone", []string{"get", k}, exitFailed, "", ""},
		{"ErrKeepAliveEnded", []string{"session", "keepalive", s}, exitFailed, "", "Solution: the session " + s + " ended"},
		{"ErrAttachEnded", []string{"set", k, "1", "--session", s}, exitFailed, "", "not_found"},
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
}
