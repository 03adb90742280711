package kvcli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestManyKeys: mget, projects and list --keys-only against the stack,
// their outputs and exit codes.
func TestManyKeys(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	const dir = "tenant/acme/project/many/"
	other := "tenant/globex/project/web/k"
	for k, v := range map[string]string{dir + "a": `{"n":1}`, dir + "b": `"two"`, other: `3`} {
		if _, err := c.Put(t.Context(), client.PutRequest{Key: k, Value: json.RawMessage(v), Semantics: contract.Semantics{Purpose: "config"}}); err != nil {
			t.Fatal(err)
		}
	}
	stack.WaitFor(t, "the projection to hold the keys", func() bool {
		p, err := c.Projects(t.Context(), client.ProjectsOptions{})
		return err == nil && strings.Contains(mustJSON(t, p), `"project":"many","keys":2`) && strings.Contains(mustJSON(t, p), `"project":"web","keys":1`)
	})
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken}
	for _, tc := range []struct {
		name         string
		args         []string
		code         int
		stdout, errs string
	}{
		{"MgetText", []string{"mget", dir + "a", dir + "b", "-o", "text"}, exitOK, "KEY                         VERSION  VALUE\n" +
			dir + "a  1        {\"n\":1}\n" + dir + "b  1        \"two\"\n", ""},
		{"MgetValue", []string{"mget", dir + "b", other, "-o", "value"}, exitOK, "\"two\"\n3\n", ""},
		{"MgetShortKeys", []string{"mget", "a", "b", "--table", "tenant/acme/project/many", "-o", "value"}, exitOK, "{\"n\":1}\n\"two\"\n", ""},
		{"MgetAbsent", []string{"mget", dir + "a", dir + "nope", "-o", "value"}, exitFailed, "{\"n\":1}\nnull\n", "[not_found]"},
		{"MgetForbidden", []string{"mget", dir + "a", other, "--token", stack.ReaderToken, "-o", "value"}, exitServer, "{\"n\":1}\nnull\n", "[forbidden]"},
		{"MgetTwice", []string{"mget", dir + "a", dir + "a"}, exitUsage, "", "keys[1]"},
		{"MgetNoKey", []string{"mget"}, exitUsage, "", "takes one KEY or more"},
		{"ProjectsValue", []string{"projects", "-o", "value"}, exitOK, "tenant/acme/project/many\ntenant/globex/project/web\n", ""},
		{"ProjectsReader", []string{"projects", "-o", "text", "--token", stack.ReaderToken}, exitOK, "TENANT  PROJECT  KEYS\nacme    many     2\n", ""},
		{"ProjectsPage", []string{"projects", "-o", "value", "--limit", "1"}, exitOK, "tenant/acme/project/many\n", "more projects follow: add --cursor"},
		{"ProjectsAll", []string{"projects", "-o", "value", "--limit", "1", "--all"}, exitOK, "tenant/acme/project/many\ntenant/globex/project/web\n", ""},
		{"KeysOnlyKeys", []string{"list", dir, "--keys-only", "-o", "keys"}, exitOK, dir + "a\n" + dir + "b\n", ""},
		{"KeysOnlyJSON", []string{"list", dir, "--keys-only", "--limit", "1", "-o", "json"}, exitOK,
			`{"items":[{"key":"` + dir + `a","version":1,"purpose":"config"}],"count":1,"truncated":true,"nextCursor":"<POSITION>.dGVuYW50L2FjbWUvcHJvamVjdC9tYW55L2E","position":"<POSITION>"}` + "\n", "more entries follow"},
		{"KeysOnlyText", []string{"list", dir, "--keys-only", "--all", "-o", "text"}, exitOK,
			"KEY                         VERSION  PURPOSE  EXPIRES\n" + dir + "a  1        config   -\n" + dir + "b  1        config   -\n", ""},
		{"KeysOnlyValue", []string{"list", dir, "--keys-only", "-o", "value"}, exitUsage, "", "--keys-only lists no values"},
		{"KeysOnlyWhere", []string{"list", dir, "--keys-only", "--where", "n eq 1"}, exitUsage, "", "--keys-only takes no --where"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tc.args, func(k string) string { return env[k] }, stdio{strings.NewReader(""), &stdout, &stderr})
			// A listing's position depends on the log's offsets.
			out := positionRE.ReplaceAllString(stdout.String(), "<POSITION>")
			if code != tc.code || out != tc.stdout || !strings.Contains(stderr.String(), tc.errs) {
				t.Fatalf("exit %d stdout %q stderr %q; want exit %d stdout %q stderr with %q",
					code, stdout.String(), stderr.String(), tc.code, tc.stdout, tc.errs)
			}
			if tc.code != exitOK && tc.errs != "" && tc.code != exitUsage && !strings.Contains(stderr.String(), "Solution: ") {
				t.Errorf("stderr has no Solution line: %q", stderr.String())
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
