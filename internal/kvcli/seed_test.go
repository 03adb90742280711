package kvcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv/stack"
)

// testSeedCommands pins the kvstore seed's commands and options (short
// keys in a namespace, set --if-not-exists, get --default, delete
// --if-value, get-counter, dec --min, list --format keys, -q, -V, the
// json default when piped, the KVSTORE_* defaults) and their exit codes.
// It runs inside TestCLI (the listing of the namespace sees its keys).
func testSeedCommands(t *testing.T, k *kvctlBin, c *client.Client, runCases func(*testing.T, []tc)) {
	ns := strings.TrimSuffix(scope, "/")
	seed := map[string]string{"KVSTORE_TABLE": ns}
	with := func(extra map[string]string) map[string]string {
		m := map[string]string{"KVSTORE_TABLE": ns}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for k, v := range map[string]string{"agent/mode": `"on"`, "quota": "1", "requests": "7"} {
		if _, err := c.Put(t.Context(), client.PutRequest{Key: scope + k, Value: json.RawMessage(v)}); err != nil {
			t.Fatal(err)
		}
	}
	runCases(t, []tc{
		{name: "seed-set-if-not-exists-text", env: seed, args: []string{"set", "agent/status", `"active"`, "--if-not-exists"}},
		{name: "err-seed-set-if-not-exists", env: seed, args: []string{"set", "agent/status", `"idle"`, "--if-not-exists"}, code: exitFailed},
		{name: "err-seed-set-if-not-exists-expected", env: seed, args: []string{"set", "agent/status", "1", "--if-not-exists", "--expected-version", "1"}, code: exitUsage},
		{name: "seed-get-short-json", env: seed, args: []string{"get", "agent/status", "--format", "json"}},
		{name: "seed-get-piped-json", env: with(map[string]string{"KVCTL_FORMAT": ""}), args: []string{"get", "agent/status"}},
		{name: "seed-get-default-text", env: seed, args: []string{"get", "config/missing", "--default", "none"}},
		{name: "seed-get-default-json", env: seed, args: []string{"get", "config/missing", "--default", "none", "--format", "json"}},
		{name: "seed-get-default-value", env: seed, args: []string{"get", "config/missing", "--default", `{"n": 1}`, "-o", "value"}},
		{name: "seed-get-default-present-value", env: seed, args: []string{"get", "agent/status", "--default", "none", "-o", "value"}},
		{name: "err-seed-get-default-bad-key", env: seed, args: []string{"get", "Config", "--default", "none"}, code: exitUsage},
		{name: "seed-delete-if-value-text", env: seed, args: []string{"delete", "agent/status", "--if-value", "active"}},
		{name: "err-seed-delete-if-value-differs", env: seed, args: []string{"delete", "agent/mode", "--if-value", "off"}, code: exitFailed},
		{name: "err-seed-delete-if-value-absent", env: seed, args: []string{"delete", "agent/status", "--if-value", "active"}, code: exitFailed},
		{name: "seed-get-counter-json", env: seed, args: []string{"get-counter", "requests", "--format", "json"}},
		{name: "seed-get-counter-text", env: seed, args: []string{"get-counter", "requests"}},
		{name: "seed-dec-min-value", env: seed, args: []string{"dec", "quota", "--min", "0", "-o", "value"}},
		{name: "err-seed-dec-min", env: seed, args: []string{"dec", "quota", "--min", "0"}, code: exitFailed},
		{name: "err-seed-inc-max", env: seed, args: []string{"inc", "quota", "--by", "3", "--max", "2"}, code: exitFailed},
		{name: "seed-list-keys", env: seed, args: []string{"list", "jobs/", "--format", "keys"}},
		{name: "seed-list-namespace-keys", env: seed, args: []string{"list", "--limit", "3", "--format", "keys"}},
		{name: "err-seed-format-keys-get", env: seed, args: []string{"get", "agent/mode", "--format", "keys"}, code: exitUsage},
		{name: "seed-quiet", env: seed, args: []string{"get", "agent/mode", "-q", "--format", "json"}},
		{name: "err-seed-quiet-not-found", env: seed, args: []string{"get", "agent/none", "--quiet"}, code: exitFailed},
		{name: "err-seed-no-namespace", args: []string{"get", "agent/mode"}, code: exitUsage},
		{name: "err-seed-bad-namespace", env: map[string]string{"KVSTORE_TABLE": "my-custom-table"}, args: []string{"set", "counter", "0"}, code: exitUsage},
		{name: "err-seed-bad-default-ttl", env: with(map[string]string{"KVSTORE_DEFAULT_TTL": "soon"}), args: []string{"set", "session", "1"}, code: exitUsage},
		{name: "seed-set-default-ttl-json", env: with(map[string]string{"KVSTORE_DEFAULT_TTL": "3600"}), args: []string{"set", "session", `"w1"`, "--format", "json"}},
		{name: "seed-lock-acquire-owner-text", env: with(map[string]string{"KVSTORE_LOCK_TTL": "600"}), args: []string{"lock", "acquire", "deploy-prod", "--owner", "agent-1"}},
		{name: "err-seed-lock-acquire-held", env: seed, args: []string{"lock", "acquire", "deploy-prod", "--ttl", "600", "--owner", "agent-2"}, code: exitUnavailable},
		{name: "seed-lock-release-owner-text", env: seed, args: []string{"lock", "release", "deploy-prod", "--owner", "agent-1"}},
		// Every command resolves its key in the namespace.
		{name: "seed-exists", env: seed, args: []string{"exists", "agent/mode"}},
		{name: "seed-field-set-text", env: seed, args: []string{"field", "set", "tasks/9", "state=new", "--create"}},
		{name: "seed-field-get-value", env: seed, args: []string{"field", "get", "tasks/9", "state", "-o", "value"}},
		{name: "seed-update-value", env: seed, args: []string{"update", "quota", "-o", "value", "--", "sh", "-c", "read n; echo $((n + 5))"}},
		{name: "seed-leader-elect-text", env: seed, args: []string{"leader", "elect", "leaders/cleanup-manager", "--ttl", "30", "--id", "agent-123"}},
		{name: "seed-leader-resign-text", env: seed, args: []string{"leader", "resign", "leaders/cleanup-manager", "--id", "agent-123"}},
		{name: "seed-lock-run", env: seed, args: []string{"lock", "run", "locks/nightly", "--holder", "h1", "--wait", "60", "--", "sh", "-c", "echo \"$KVCTL_LOCK_KEY\""}},
		{name: "seed-txn-text", env: seed, stdin: `[{"op":"inc","key":"total-requests","by":1},{"op":"set","key":"last-request-time","value":"1700000000"}]`,
			args: []string{"transaction", "--file", "-"}},
		{name: "seed-txn-table-flag-text", stdin: `[{"op":"inc","key":"total-requests","by":1}]`, args: []string{"transaction", "--file", "-", "--table", ns}},
		{name: "err-seed-queue-empty", env: seed, args: []string{"get", "work-queue", "--url", fakeServer(t, 404, `{"error":{"code":"queue_empty","message":"queue work-queue is empty"}}`)}, code: exitUnavailable},
		{name: "err-seed-server", env: seed, args: []string{"get", "agent/mode", "--url", fakeServer(t, 500, `{"error":{"code":"internal","message":"internal error"}}`)}, code: exitServer},
	})

	t.Run("Verbose", func(t *testing.T) {
		r := k.run(t, "", seed, "get", "agent/mode", "-V", "-o", "value")
		if r.code != 0 || r.stdout != "\"on\"\n" || !strings.Contains(r.stderr, "kvctl: GET 127.0.0.1:") ||
			!strings.Contains(r.stderr, "/v1/kv/tenant/acme/project/demo/agent/mode: 200 OK in ") || strings.Contains(r.stderr, `"on"`) {
			t.Fatalf("get -V: %+v", r)
		}
		unavailable := fakeServer(t, 503, `{"error":{"code":"partition_unavailable","message":"partition 1 is catching up; retry"}}`)
		r = k.run(t, "", seed, "get", "agent/mode", "--verbose", "--url", unavailable)
		if r.code != exitServer || !strings.Contains(r.stderr, "kvctl: attempt 1 failed (") || !strings.Contains(r.stderr, "partition_unavailable): retrying in ") {
			t.Fatalf("get -V against an unavailable server: %+v", r)
		}
	})

	// A bounded decrement is one request, refused or not: the server
	// checks the bound; kvctl neither reads the counter nor retries.
	t.Run("BoundedDecIsOneRequest", func(t *testing.T) {
		for _, want := range []struct {
			code   int
			status string
		}{{exitOK, ": 200 OK in "}, {exitFailed, ": 409 Conflict in "}} {
			r := k.run(t, "", seed, "dec", "bounded", "--create", "--min", "-1", "-V", "-o", "value")
			if r.code != want.code || strings.Count(r.stderr, "kvctl: ") != 1 ||
				!strings.Contains(r.stderr, "kvctl: POST ") || !strings.Contains(r.stderr, "/v1/kv/tenant/acme/project/demo/bounded:increment"+want.status) {
				t.Fatalf("dec --min -V: exit %d, want %d, and one POST answered%s: %+v", r.code, want.code, want.status, r)
			}
		}
	})
}

// TestSeedUseCases runs the kvstore seed's use cases 1, 2 and 5 as the
// seed writes them (testdata/seed-use-cases.sh), with kvctl named kvstore
// on PATH and a namespace in KVSTORE_TABLE; the seed's rate limit needs
// --min 0 (an eskv counter may go below zero).
func TestSeedUseCases(t *testing.T) {
	t.Parallel()
	_, _, env := seedShell(t, "tenant/acme/project/seed")
	cmd := exec.Command("bash", "-eu", filepath.Join("testdata", "seed-use-cases.sh"))
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("seed use cases: %v\n%s", err, out)
	}
	got := normalize(string(out))
	path := filepath.Join("testdata", "seed-use-cases.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it)\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// TestDecMinConcurrent: 8 clients decrementing a counter of 20 with
// --min 0, 5 times each, succeed exactly 20 times and leave it at 0 (the
// server checks the bound as it decides each decrement, so two never take
// the last unit).
func TestDecMinConcurrent(t *testing.T) {
	t.Parallel()
	url := stack.MustStart(t)
	c := client.New(url, stack.DevToken)
	const ns, quota = "tenant/acme/project/rate", 20
	if _, err := c.Put(t.Context(), client.PutRequest{Key: ns + "/quota", Value: json.RawMessage("20")}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"KVCTL_URL": url, "KVCTL_TOKEN": stack.DevToken, "KVSTORE_TABLE": ns}
	codes := make(chan int, 40)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 5 {
				var stdout, stderr bytes.Buffer
				codes <- run(t.Context(), []string{"dec", "quota", "--min", "0", "-q"}, func(k string) string { return env[k] }, stdio{strings.NewReader(""), &stdout, &stderr})
			}
		})
	}
	wg.Wait()
	close(codes)
	counts := map[int]int{}
	for code := range codes {
		counts[code]++
	}
	if counts[exitOK] != quota || counts[exitFailed] != 40-quota {
		t.Fatalf("exit codes %v; want %d successes and %d exit 1", counts, quota, 40-quota)
	}
	n, _, err := client.Call[contract.CounterAnswer](t.Context(), c, contract.OpGetCounter, ns+"/quota", nil)
	if err != nil || n.Value != 0 {
		t.Fatalf("quota %d, %v; want 0", n.Value, err)
	}
}

// seedShell is a shell environment for the seed's scripts as written: a
// stack (at url), kvctl on PATH as kvstore (in the directory bin), its URL
// and token, the namespace table in KVSTORE_TABLE, and none of the
// caller's other KVCTL_ or KVSTORE_ settings.
func seedShell(t *testing.T, table string) (bin, url string, env []string) {
	t.Helper()
	url = stack.MustStart(t)
	bin = t.TempDir()
	if err := os.Symlink(mustBuild(t), filepath.Join(bin, "kvstore")); err != nil {
		t.Fatal(err)
	}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "KVCTL_") && !strings.HasPrefix(name, "KVSTORE_") && name != "PATH" && name != "ESKV_DEV_TOKEN" {
			env = append(env, kv)
		}
	}
	return bin, url, append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KVCTL_URL="+url, "KVCTL_TOKEN="+stack.DevToken, "KVSTORE_TABLE="+table)
}

// useCase3 is the seed's "Use Case 3: Task Distribution via Queue" as
// written, with three adaptations for a test: the producer's list is
// TASKS (30 tasks, not 3); process-task.py is process_task, which records
// the task's data in $DONE/$WORKER; and an empty queue (exit 4) ends a
// consumer instead of sleeping 10s and polling forever, since every task
// was pushed before the consumers start. The consumer loop is a function
// run by three parallel workers.
const useCase3 = `
process_task() { printf '%s\n' "$1" | jq -r '.data' >> "$DONE/$WORKER"; }

# Producer: Add tasks to queue
for task in $TASKS; do
  kvstore queue push work-queue "{\"task\": \"$task\", \"params\": {...}}"
done

# Consumer agents (parallel workers)
consumer() {
while true; do
  # Pop task with 5-minute visibility timeout
  task=$(kvstore queue pop work-queue --visibility-timeout 300)
  popped=$?

  if [ $popped -eq 0 ]; then
    # Process task
    process_task "$task"

    # Acknowledge completion (delete from queue)
    receipt=$(echo "$task" | jq -r '.receipt')
    kvstore queue ack work-queue "$receipt"
  else
    echo "Queue empty, waiting..."
    [ $popped -eq 4 ] && break # the test's adaptation: every task was pushed
    sleep 10
  fi
done
}
for WORKER in 1 2 3; do WORKER=$WORKER consumer & done
wait
kvstore queue size work-queue
`

// TestSeedUseCase3 runs useCase3 with kvctl installed as kvstore and the
// namespace in KVSTORE_TABLE: every task is processed exactly once (by
// one of the three workers), every ack succeeds, and the queue ends
// empty.
func TestSeedUseCase3(t *testing.T) {
	t.Parallel()
	_, _, env := seedShell(t, "tenant/acme/project/work")
	done := t.TempDir()
	var tasks []string
	for i := range 30 {
		tasks = append(tasks, fmt.Sprintf("task%d", i+1))
	}
	cmd := exec.Command("bash", "-c", useCase3)
	cmd.Env = append(env, "DONE="+done, "TASKS="+strings.Join(tasks, " "))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("use case 3: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), `"acked":true`); n != len(tasks) {
		t.Errorf("%d acks succeeded, want %d\n%s", n, len(tasks), out)
	}
	if !strings.HasSuffix(string(out), "{\"queue\":\"tenant/acme/project/work/work-queue\",\"size\":0,\"inFlight\":0}\n") {
		t.Errorf("the queue does not end empty:\n%s", out)
	}
	seen := map[string]string{}
	for w := 1; w <= 3; w++ {
		b, err := os.ReadFile(filepath.Join(done, strconv.Itoa(w)))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			var task struct{ Task string }
			if err := json.Unmarshal([]byte(strings.ReplaceAll(line, "{...}", "{}")), &task); err != nil {
				t.Fatalf("worker %d processed %q: %v", w, line, err)
			}
			if prev, ok := seen[task.Task]; ok {
				t.Errorf("%s processed twice (workers %s and %d)", task.Task, prev, w)
			}
			seen[task.Task] = strconv.Itoa(w)
		}
	}
	for _, task := range tasks {
		if _, ok := seen[task]; !ok {
			t.Errorf("%s never processed", task)
		}
	}
}
