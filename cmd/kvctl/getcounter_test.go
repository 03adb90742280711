package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eskv/eskv/api/client"
)

func TestGetCounter(t *testing.T) {
	url := mustStack(t)
	c := client.New(url, devToken)
	counter, text := scope+"counters/visits", scope+"counters/text"
	if _, err := c.Increment(t.Context(), client.IncrementRequest{Key: counter, By: 42, Create: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(t.Context(), client.PutRequest{Key: text, Value: json.RawMessage(`"seven"`)}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": devToken}
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"OKText", []string{counter}, exitOK, "42\n", ""},
		{"OKValue", []string{counter, "--format", "value"}, exitOK, "42\n", ""},
		{"OKJSON", []string{counter, "-o", "json"}, exitOK, `{"key":"` + counter + `","value":42,"version":1}` + "\n", ""},
		{"ErrNotFound", []string{scope + "counters/missing"}, exitFailed, "", "[not_found]"},
		{"ErrWrongType", []string{text}, exitFailed, "", "[wrong_type]"},
		{"ErrBadKey", []string{scope + "Counter"}, exitUsage, "", "[invalid]"},
		{"ErrArgs", nil, exitUsage, "", "takes KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), append([]string{"get-counter"}, tc.args...), func(k string) string { return env[k] },
				strings.NewReader(""), &stdout, &stderr)
			if code != tc.code || stdout.String() != tc.stdout || !strings.Contains(stderr.String(), tc.errs) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr with %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.errs)
			}
		})
	}
}
