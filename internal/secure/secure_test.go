package secure_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eskv/eskv/internal/secure"
)

// TestSecret: a secret comes from its variable or its file (one trailing
// newline dropped, CRLF too), never both; errors name the setting and
// never show the secret.
func TestSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ value, file, want string }{
		{"from-env", "", "from-env"},
		{"", "", ""},
		{"", write("lf", "from-file\n"), "from-file"},
		{"", write("crlf", "from-file\r\n"), "from-file"},
		{"", write("bare", "from-file"), "from-file"},
	} {
		got, err := secure.Secret(tc.value, tc.file, "ESKV_X_PASSWORD", "ESKV_X_PASSWORD_FILE")
		if err != nil || got != tc.want {
			t.Errorf("Secret(%q, %q) = %q, %v; want %q", tc.value, tc.file, got, err, tc.want)
		}
	}
	for name, tc := range map[string]struct{ value, file, want string }{
		"Both":    {"s3cret", write("both", "s3cret"), "ESKV_X_PASSWORD and ESKV_X_PASSWORD_FILE"},
		"Empty":   {"", write("empty", "\n"), "ESKV_X_PASSWORD_FILE"},
		"Missing": {"", filepath.Join(dir, "missing"), "ESKV_X_PASSWORD_FILE"},
	} {
		_, err := secure.Secret(tc.value, tc.file, "ESKV_X_PASSWORD", "ESKV_X_PASSWORD_FILE")
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want an error naming %s without the secret", name, err, tc.want)
		}
	}
}

func TestPrefixedNames(t *testing.T) {
	if got := secure.Prefixed("clickhouse")("tls-ca-file"); got != "-clickhouse-tls-ca-file (ESKV_CLICKHOUSE_TLS_CA_FILE)" {
		t.Fatalf("got %q", got)
	}
}
