package kvcli

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestResolveKey(t *testing.T) {
	t.Parallel()
	demo := namespace{project: "tenant/acme/project/demo", source: "KVSTORE_TABLE"}
	for _, tc := range []struct {
		name, arg string
		ns        namespace
		want, err string
	}{
		{"OKFullKeyWithoutNamespace", "tenant/a/project/p/k", namespace{}, "tenant/a/project/p/k", ""},
		{"OKFullKeyIgnoresNamespace", "tenant/a/project/p/k", demo, "tenant/a/project/p/k", ""},
		{"OKShortKey", "rate-limit/api-key-123", demo, "tenant/acme/project/demo/rate-limit/api-key-123", ""},
		{"OKShortPrefix", "config/", demo, "tenant/acme/project/demo/config/", ""},
		{"ErrShortKeyWithoutNamespace", "counter", namespace{}, "", "no namespace was given"},
		{"ErrEmpty", "", demo, "", "key is missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveKey(tc.arg, tc.ns)
			if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("resolveKey(%q) = %q, %v; want %q, %q", tc.arg, got, err, tc.want, tc.err)
			}
		})
	}
}

// TestResolveNamespace checks where the namespace comes from (flag, then
// KVSTORE_TABLE, KVCTL_NAMESPACE, KVCTL_PROJECT) and that a malformed one
// is exit 2 even for a full key, through the whole command line.
func TestResolveNamespace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		env    map[string]string
		args   []string
		want   string // the namespace, or the error's text
		code   int
		source string
	}{
		{"OKNone", nil, nil, "", exitOK, ""},
		{"OKFlag", map[string]string{"KVSTORE_TABLE": "tenant/e/project/e"}, []string{"--table", "tenant/f/project/f"}, "tenant/f/project/f", exitOK, "--table"},
		{"OKProjectAlias", nil, []string{"--project", "tenant/f/project/f/"}, "tenant/f/project/f", exitOK, "--project"},
		{"OKSeedEnvFirst", map[string]string{"KVSTORE_TABLE": "tenant/s/project/s", "KVCTL_NAMESPACE": "tenant/n/project/n"}, nil, "tenant/s/project/s", exitOK, "KVSTORE_TABLE"},
		{"OKNamespaceEnv", map[string]string{"KVCTL_NAMESPACE": "tenant/n/project/n", "KVCTL_PROJECT": "tenant/p/project/p"}, nil, "tenant/n/project/n", exitOK, "KVCTL_NAMESPACE"},
		{"OKProjectEnv", map[string]string{"KVCTL_PROJECT": "tenant/p/project/p"}, nil, "tenant/p/project/p", exitOK, "KVCTL_PROJECT"},
		{"ErrSeedTableName", map[string]string{"KVSTORE_TABLE": "aws-primitives-tool-kvstore"}, nil, `KVSTORE_TABLE "aws-primitives-tool-kvstore" is not tenant/<tenant>/project/<project>`, exitUsage, ""},
		{"ErrTenantOnly", nil, []string{"--table", "tenant/acme"}, "is not tenant/<tenant>/project/<project>", exitUsage, ""},
		{"ErrFlagsDiffer", nil, []string{"--table", "tenant/a/project/a", "--project", "tenant/b/project/b"}, "differ", exitUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			a := &app{getenv: func(k string) string { return tc.env[k] }, stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, cmdPath: "kvctl"}
			root := a.rootCommand()
			// A full key and an unreachable URL: resolve runs, the call is never made.
			root.SetArgs(append([]string{"exists", "tenant/x/project/y/k", "--url", "http://127.0.0.1:1", "--timeout", "1"}, tc.args...))
			root.SetOut(&stdout)
			root.SetErr(&stderr)
			err := root.Execute()
			if tc.code == exitUsage {
				if code := a.fail(err); code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
					t.Fatalf("exit %d, stderr %q; want exit 2 with %q", code, stderr.String(), tc.want)
				}
				return
			}
			if a.ns.project != tc.want || a.ns.source != tc.source {
				t.Fatalf("namespace %+v; want %q from %q", a.ns, tc.want, tc.source)
			}
		})
	}
}

func TestDurationFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"60", time.Minute, true},
		{"1m30s", 90 * time.Second, true},
		{"0", 0, true},
		{"soon", 0, false},
		{"1.5", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			var d time.Duration
			err := durationFlag{&d}.Set(tc.in)
			if (err == nil) != tc.ok || d != tc.want {
				t.Fatalf("Set(%q) = %v, %v", tc.in, d, err)
			}
		})
	}
}
