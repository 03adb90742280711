package kvcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// TestParseTxnFile reads the seed's transaction files and eskv's own
// into the API's body; a malformed file names what is wrong and where.
func TestParseTxnFile(t *testing.T) {
	t.Parallel()
	const project = "tenant/acme/project/demo"
	i64 := func(v int64) *int64 { return &v }
	yes, no := true, false
	for _, tc := range []struct {
		name    string
		file    string
		project string
		want    contract.TxnBody
		err     string // "" when valid
	}{
		{"OKSeedExample", `[
  {"op": "set", "key": "account/balance", "value": 1000, "condition": "attribute_not_exists(PK)"},
  {"op": "inc", "key": "counter/transactions", "by": 1},
  {"op": "delete", "key": "temp/lock", "condition": "attribute_exists(PK)"}
]`, project, contract.TxnBody{Ops: []contract.TxnOp{
			{Op: contract.OpPut, Key: project + "/account/balance", Value: json.RawMessage(`1000`), Condition: &contract.Condition{Exists: &no}},
			{Op: contract.OpIncrement, Key: project + "/counter/transactions", By: i64(1), Create: true},
			{Op: contract.OpDelete, Key: project + "/temp/lock", Condition: &contract.Condition{Exists: &yes}},
		}}, ""},
		{"OKSeedUseCase8", `[{"op":"inc","key":"total-requests","by":1},{"op":"inc","key":"successful-requests","by":1},
  {"op":"set","key":"last-request-time","value":"1700000000"}]`, project, contract.TxnBody{Ops: []contract.TxnOp{
			{Op: contract.OpIncrement, Key: project + "/total-requests", By: i64(1), Create: true},
			{Op: contract.OpIncrement, Key: project + "/successful-requests", By: i64(1), Create: true},
			{Op: contract.OpPut, Key: project + "/last-request-time", Value: json.RawMessage(`"1700000000"`)},
		}}, ""},
		{"OKEskvOps", `{"requestId":"t-1","ops":[
  {"op":"put","key":"tenant/a/project/p/x","value":{"n":1},"condition":{"expectedVersion":3}},
  {"op":"increment","key":"tenant/a/project/p/c","by":2},
  {"op":"dec","key":"tenant/a/project/p/d","create":false},
  {"op":"patch","key":"tenant/a/project/p/o","set":{"s":"done"},"unset":["e"],"condition":{"field":"s","equals":"open"}},
  {"op":"check","key":"tenant/a/project/p/l","condition":{"version":7}},
  {"op":"delete","key":"tenant/a/project/p/y","expectedVersion":2},
  {"op":"check","key":"tenant/a/project/p/z","condition":{"exists":false}}]}`, "", contract.TxnBody{RequestID: "t-1", Ops: []contract.TxnOp{
			{Op: contract.OpPut, Key: "tenant/a/project/p/x", Value: json.RawMessage(`{"n":1}`), Condition: &contract.Condition{Version: i64(3)}},
			{Op: contract.OpIncrement, Key: "tenant/a/project/p/c", By: i64(2)},
			{Op: contract.OpIncrement, Key: "tenant/a/project/p/d", By: i64(-1)},
			{Op: contract.OpPatch, Key: "tenant/a/project/p/o", Set: map[string]json.RawMessage{"s": json.RawMessage(`"done"`)}, Unset: []string{"e"},
				Condition: &contract.Condition{Field: "s", Equals: json.RawMessage(`"open"`)}},
			{Op: contract.OpCheck, Key: "tenant/a/project/p/l", Condition: &contract.Condition{Version: i64(7)}},
			{Op: contract.OpDelete, Key: "tenant/a/project/p/y", Condition: &contract.Condition{Version: i64(2)}},
			{Op: contract.OpCheck, Key: "tenant/a/project/p/z", Condition: &contract.Condition{Exists: &no}},
		}}, ""},
		{"ErrEmpty", " \n", project, contract.TxnBody{}, "the file is empty"},
		{"ErrNotJSON", "set a 1", project, contract.TxnBody{}, "not JSON"},
		{"ErrBrokenArray", `[{"op":"set"`, project, contract.TxnBody{}, "not a JSON array"},
		{"ErrNoOps", `[]`, project, contract.TxnBody{}, "no operations"},
		{"ErrUnknownOp", `[{"op":"push","key":"q"}]`, project, contract.TxnBody{}, `op 0: op "push" is not one of`},
		{"ErrUnknownMember", `[{"op":"set","key":"a","value":1},{"op":"set","key":"b","valeu":1}]`, project, contract.TxnBody{}, `op 1: unknown member "valeu"`},
		{"ErrWrongType", `[{"op":"inc","key":"a","by":"one"}]`, project, contract.TxnBody{}, "op 0: by has the wrong type"},
		{"ErrUnknownExpression", `[{"op":"delete","key":"a","condition":"attribute_exists(owner)"}]`, project, contract.TxnBody{}, "not a supported expression"},
		{"ErrUnknownConditionMember", `[{"op":"delete","key":"a","condition":{"versoin":1}}]`, project, contract.TxnBody{}, `unknown member "versoin"`},
		{"ErrVersionsDisagree", `[{"op":"delete","key":"a","expectedVersion":1,"condition":{"version":2}}]`, project, contract.TxnBody{}, "contradicts"},
		{"ErrNoKey", `[{"op":"delete"}]`, project, contract.TxnBody{}, "key is missing"},
		{"ErrRelativeKeyWithoutProject", `[{"op":"delete","key":"a"}]`, "", contract.TxnBody{}, "no namespace was given"},
		{"ErrUnknownBodyMember", `{"ops":[],"id":"x"}`, project, contract.TxnBody{}, `unknown member "id"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTxnFile([]byte(tc.file), namespace{project: tc.project})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one with %q", err, tc.err)
				}
				if txnSolution(err) == "" {
					t.Fatal("no solution")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := got.Validate(); err != nil {
				t.Fatalf("the body is not valid: %v", err)
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(tc.want)
			if string(g) != string(w) {
				t.Fatalf("got  %s\nwant %s", g, w)
			}
		})
	}
}

// TestTransaction runs kvctl transaction against a stack: the seed's
// file applies atomically, a failed condition names its op and changes
// nothing, and each class of failure has its exit code.
func TestTransaction(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	const project = "tenant/acme/project/txn"
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVCTL_PROJECT": project, "KVCTL_FORMAT": formatText}
	kvctl := func(t *testing.T, stdin string, args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), append([]string{"transaction"}, args...), func(k string) string { return env[k] }, stdio{strings.NewReader(stdin), &stdout, &stderr})
		return code, stdout.String(), stderr.String()
	}
	file := func(t *testing.T, content string) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), "tx.json")
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	value := func(t *testing.T, key string) string {
		t.Helper()
		e, err := c.Get(t.Context(), project+"/"+key)
		if contract.ErrorCode(err) == contract.ENotFound {
			return "absent"
		}
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s@%d", e.Value, e.Version)
	}
	if _, err := c.Put(t.Context(), client.PutRequest{Key: project + "/temp/lock", Value: json.RawMessage(`"tmp"`)}); err != nil {
		t.Fatal(err)
	}
	seed := file(t, `[
  {"op": "set", "key": "account/balance", "value": 1000, "condition": "attribute_not_exists(PK)"},
  {"op": "inc", "key": "counter/transactions", "by": 1},
  {"op": "delete", "key": "temp/lock", "condition": "attribute_exists(PK)"}
]`)

	t.Run("OKSeedFile", func(t *testing.T) {
		code, stdout, stderr := kvctl(t, "", "--file", seed)
		if code != exitOK || stderr != "" {
			t.Fatalf("exit %d, stderr %s", code, stderr)
		}
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		if len(lines) != 4 || !strings.HasSuffix(lines[0], "applied: 3 ops") ||
			lines[1] != "put       "+project+"/account/balance version 1" ||
			lines[2] != "increment "+project+"/counter/transactions version 1" ||
			lines[3] != "delete    "+project+"/temp/lock deleted, version 2" {
			t.Fatalf("stdout:\n%s", stdout)
		}
		if got := value(t, "account/balance") + " " + value(t, "counter/transactions") + " " + value(t, "temp/lock"); got != "1000@1 1@1 absent" {
			t.Fatalf("after the transaction: %s", got)
		}
	})

	t.Run("ErrConditionFailedChangesNothing", func(t *testing.T) {
		// The same file again: op 0's attribute_not_exists(PK) fails.
		code, stdout, stderr := kvctl(t, "", "--file", seed)
		if code != exitFailed || stdout != "" ||
			!strings.Contains(stderr, "Error: transaction not applied: op 0 (put "+project+"/account/balance) failed") ||
			!strings.Contains(stderr, "Solution: nothing was applied") || !strings.Contains(stderr, "is at version 1 now (value 1000)") {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		if got := value(t, "account/balance") + " " + value(t, "counter/transactions"); got != "1000@1 1@1" {
			t.Fatalf("after the failed transaction: %s", got)
		}
	})

	t.Run("ErrLaterOpFailedChangesNothing", func(t *testing.T) {
		code, _, stderr := kvctl(t, `[{"op":"inc","key":"counter/transactions"},
{"op":"set","key":"account/balance","value":900,"condition":{"expectedVersion":1}},
{"op":"delete","key":"temp/lock","condition":"attribute_exists(PK)"}]`, "--file", "-")
		if code != exitFailed || !strings.Contains(stderr, "op 2 (delete "+project+"/temp/lock)") || !strings.Contains(stderr, "does not exist now") {
			t.Fatalf("exit %d\nstderr %s", code, stderr)
		}
		if got := value(t, "account/balance") + " " + value(t, "counter/transactions"); got != "1000@1 1@1" {
			t.Fatalf("after the failed transaction: %s", got)
		}
	})

	t.Run("OKStdinJSONAndReplay", func(t *testing.T) {
		tx := `{"requestId":"move-1","ops":[{"op":"set","key":"account/balance","value":900,"expectedVersion":1},
{"op":"increment","key":"` + project + `/counter/transactions","by":1},{"op":"check","key":"temp/lock","condition":{"exists":false}}]}`
		code, stdout, stderr := kvctl(t, tx, "--file", "-", "--format", "json")
		var ans contract.TxnAnswer
		if code != exitOK || json.Unmarshal([]byte(stdout), &ans) != nil || ans.TxnID == "" || len(ans.Results) != 3 ||
			ans.Results[0].Version != 2 || string(ans.Results[1].Value) != "2" || ans.Results[2].Version != 0 {
			t.Fatalf("exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
		}
		code, replay, stderr := kvctl(t, tx, "--file", "-", "--format", "json")
		if code != exitOK || replay != stdout || !strings.Contains(stderr, "request move-1 was already applied") {
			t.Fatalf("replay: exit %d\nstdout %s (first %s)\nstderr %s", code, replay, stdout, stderr)
		}
		if got := value(t, "account/balance") + " " + value(t, "counter/transactions"); got != "900@2 2@2" {
			t.Fatalf("after the replay: %s", got)
		}
		code, _, stderr = kvctl(t, `[{"op":"inc","key":"counter/transactions"}]`, "--file", "-", "--request-id", "move-1")
		if code != exitFailed || !strings.Contains(stderr, "Solution: request id move-1 was used for another transaction") {
			t.Fatalf("reused request id: exit %d\nstderr %s", code, stderr)
		}
		if got := value(t, "counter/transactions"); got != "2@2" {
			t.Fatalf("after the reused request id: %s", got)
		}
		code, stdout, _ = kvctl(t, `[{"op":"dec","key":"counter/transactions","by":2},{"op":"check","key":"account/balance","condition":{"field":"n","equals":null}}]`,
			"--file", "-", "-o", "value")
		if code != exitOK || stdout != "0\nnull\n" {
			t.Fatalf("value format: exit %d, stdout %q", code, stdout)
		}
	})

	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		stderr      []string
	}{
		{"ErrMalformedFile", `[{"op":"set","key":"a","value":1,}]`, []string{"--file", "-"}, exitUsage, []string{"Error: stdin: not a JSON array", "Solution: a transaction file is a JSON array"}},
		{"ErrUnknownMember", `[{"op":"set","key":"a","value":1},{"op":"inc","key":"b","step":1}]`, []string{"--file", "-"}, exitUsage, []string{`op 1: unknown member "step"`, "Solution: fix operation 1"}},
		{"ErrInvalidOp", `[{"op":"set","key":"a"}]`, []string{"--file", "-"}, exitUsage, []string{"op 0: value is required", "Solution: fix operation 0"}},
		{"ErrCrossProject", `[{"op":"set","key":"a","value":1},{"op":"set","key":"tenant/acme/project/other/a","value":1}]`, []string{"--file", "-"}, exitUsage,
			[]string{"one project", "Solution: a transaction changes keys of one project only"}},
		{"ErrNoFile", "", nil, exitUsage, []string{"no --file given", "Solution: give the operations with --file"}},
		{"ErrMissingFile", "", []string{"--file", "/nonexistent/tx.json"}, exitUsage, []string{"read /nonexistent/tx.json", "Solution:"}},
		{"ErrNoProject", `[{"op":"set","key":"a","value":1}]`, []string{"--file", "-", "--project", ""}, exitUsage, []string{"no namespace was given", "Solution: give a full key"}},
		{"ErrServer", `[{"op":"set","key":"a","value":1}]`, []string{"--file", "-", "--url", fakeServer(t, 500, `{"error":{"code":"internal","message":"internal error"}}`)}, exitServer,
			[]string{"Error: internal error [internal]", "Solution: the server failed"}},
		{"ErrUnreachable", `[{"op":"set","key":"a","value":1}]`, []string{"--file", "-", "--url", closedURL(t)}, exitServer, []string{"cannot reach eskv"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := kvctl(t, tc.stdin, tc.args...)
			if code != tc.code || stdout != "" {
				t.Fatalf("exit %d (want %d)\nstdout %s\nstderr %s", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Fatalf("stderr without %q:\n%s", s, stderr)
				}
			}
		})
	}
}
