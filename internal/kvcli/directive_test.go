package kvcli

import (
	"bytes"
	"strings"
	"testing"
)

// TestDirectiveFlag: a directive that is not one, from --directive or
// KVCTL_DIRECTIVE, exits 2 before any call, saying which; --dead-letter-value
// alone is a usage error too.
func TestDirectiveFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"ErrFlag", nil, []string{"set", key, "1", "--directive", "two words"}, `--directive "two words" is not a directive`},
		{"ErrEnv", map[string]string{"KVCTL_DIRECTIVE": strings.Repeat("d", 65)}, []string{"set", key, "1"}, "is not a directive"},
		{"ErrDeadLetterValueAlone", nil, []string{"update", key, "--dead-letter-value", "--", "true"}, "--dead-letter-value needs --dead-letter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			env := map[string]string{"KVCTL_URL": "http://127.0.0.1:1", "KVCTL_TOKEN": "t-0123456789abcdef"}
			for k, v := range tc.env {
				env[k] = v
			}
			code := run(t.Context(), tc.args, func(k string) string { return env[k] }, stdio{strings.NewReader(""), &stdout, &stderr})
			if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, stderr.String(), exitUsage, tc.want)
			}
		})
	}
}
