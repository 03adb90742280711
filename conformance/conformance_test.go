package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/testenv/procs"
)

// scenarios are the protocol's seven scenarios; those in exclusive kill
// a writer, which every concurrent scenario's traffic would feel: they
// run alone.
var (
	scenarios = []string{"write-then-read", "cas-conflict", "retry-replay", "watch-resume",
		"lock-keepalive-loss", "queue-redeliver", "txn-refusal"}
	exclusive = map[string]bool{"watch-resume": true}
)

// runner is how one client's conformance runner is started: file (from
// the repository's root) must exist, and the runner is argv + scenario.
type runner struct {
	client string
	file   string
	argv   func(h *harness) ([]string, error)
	// built, when set, is a file the runner imports that a build makes,
	// and how to make it.
	built, build string
}

// runners is every client's runner (docs/clients.md). A missing one
// fails its client's scenarios.
var runners = []runner{
	{"go", "conformance/gorunner/main.go", (*harness).goRunner, "", ""},
	{"python", "clients/python/conformance.py", command("python3", "clients/python/conformance.py"), "", ""},
	{"typescript", "clients/typescript/test/conformance.mjs", command("node", "clients/typescript/test/conformance.mjs"),
		"clients/typescript/dist/esm/index.js", "make test-conformance (or: cd clients/typescript && npm ci && npm run build)"},
}

// command is a runner that is an interpreter and a script.
func command(argv ...string) func(*harness) ([]string, error) {
	return func(*harness) ([]string, error) { return argv, nil }
}

const (
	partitions = 4
	token      = "conformance-token-0123456789abcdef"
	// suiteToken may read and write tenant/: the Python client's own
	// integration tests (pythonSuite) make a tenant per test.
	suiteToken      = "conformance-suite-token-0123456789abcdef"
	suiteTimeout    = 5 * time.Minute
	scenarioTimeout = 90 * time.Second
)

// harness is the stack, its proxy and its control API.
type harness struct {
	t       *testing.T
	root    string // the repository
	ws      *procs.Writers
	proxy   *Proxy
	url     string // the proxy's
	control string
	kills   sync.RWMutex // exclusive scenarios take it alone
	restart sync.WaitGroup

	buildOnce sync.Once
	goBin     string
	goErr     error
}

func TestConformance(t *testing.T) {
	t.Parallel()
	h := mustHarness(t)
	for _, r := range runners {
		t.Run(r.client, func(t *testing.T) {
			t.Parallel()
			for _, sc := range scenarios {
				t.Run(sc, func(t *testing.T) {
					t.Parallel()
					h.run(t, r, sc)
				})
			}
		})
	}
	t.Run("python-suite", func(t *testing.T) {
		t.Parallel()
		h.pythonSuite(t)
	})
}

// pythonSuite runs the Python client's own tests against the stack (its
// integration tests, seed 003's test list through eskv.botdb among them,
// and its unit tests), each reported as a subtest
// python-suite/<Class>.<method> from the JSON lines of
// clients/python/tests/report.py. A skipped test fails.
func (h *harness) pythonSuite(t *testing.T) {
	h.kills.RLock()
	defer h.kills.RUnlock()
	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "python3", "clients/python/tests/report.py")
	cmd.Dir = h.root
	cmd.Env = append(proc.BaseEnv(), "ESKV_URL="+h.url, "ESKV_TOKEN="+suiteToken)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var results int
	for _, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var r struct{ Test, Outcome, Detail string }
		if json.Unmarshal([]byte(line), &r) != nil || r.Test == "" {
			continue
		}
		results++
		t.Run(r.Test, func(t *testing.T) {
			if r.Outcome != "ok" {
				t.Errorf("%s: %s\n%s", r.Test, r.Outcome, r.Detail)
			}
		})
	}
	t.Logf("python3 clients/python/tests/report.py: %d tests; what they printed:\n%s", results, stderr.String())
	if err != nil || results == 0 {
		t.Fatalf("python3 clients/python/tests/report.py: %v, %d results\n--- stderr ---\n%s", errors.Join(err, ctx.Err()), results, stderr.String())
	}
}

// mustHarness starts a projector and two writers whose tokens file gives
// token read and write on tenant/conformance/, the proxy and the control
// API, until the test ends.
func mustHarness(t *testing.T) *harness {
	root, err := proc.ModuleDir(t.Context(), "github.com/eskv/eskv")
	if err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(t.TempDir(), "tokens.json")
	b := fmt.Sprintf(`{"tokens":[{"token":%q,"principal":"conformance","grants":[{"prefix":"tenant/conformance/","rights":["read","write"]}]},
		{"token":%q,"principal":"python-suite","grants":[{"prefix":"tenant/","rights":["read","write"]}]}]}`, token, suiteToken)
	if err := os.WriteFile(tokens, []byte(b), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, root: root}
	h.ws = procs.MustWriters(t, procs.Config{Writers: 2, Partitions: partitions, WriterEnv: []string{"ESKV_TOKENS_FILE=" + tokens}})
	if h.proxy, err = NewProxy(h.ws.URLs); err != nil {
		t.Fatal(err)
	}
	h.url = serve(t, h.proxy)
	h.control = serve(t, Control(h.proxy, h.kill))
	t.Cleanup(h.restart.Wait)
	h.settle(t)
	return h
}

// serve serves handler on a free port until the test ends and returns
// its base URL.
func serve(t *testing.T, handler http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// kill SIGKILLs writer i after turning the proxy away from it, then starts
// it again in the background; the proxy sends to it again once it is
// ready.
func (h *harness) kill(i int) (string, error) {
	other := 1 - i
	if err := proc.WaitHTTP(context.Background(), 60*time.Second, nil, h.ws.URLs[other]+"/readyz"); err != nil {
		return "", fmt.Errorf("no writer to fail over to: %w", err)
	}
	h.proxy.SetUp(i, false)
	w := h.ws.Procs[i]
	w.Kill()
	h.restart.Add(1)
	go func() {
		defer h.restart.Done()
		if err := w.Start(); err != nil {
			h.t.Errorf("starting %s again: %v", h.proxy.Name(i), err)
			return
		}
		if err := proc.WaitHTTP(context.Background(), 60*time.Second, w, h.ws.URLs[i]+"/readyz"); err != nil {
			h.t.Errorf("%s after its restart: %v", h.proxy.Name(i), err)
			return
		}
		h.proxy.SetUp(i, true)
	}()
	return h.proxy.Name(i), nil
}

// settle waits until every killed writer is back behind the proxy, every
// writer owns partitions (the group has balanced: none is moving) and a
// write through the proxy succeeds on every partition (its owner caught
// up), so that no scenario meets a partition between writers but
// watch-resume.
func (h *harness) settle(t *testing.T) {
	h.restart.Wait()
	testenv.WaitFor(t, 60*time.Second, "every writer owning partitions", func() bool {
		owners, err := h.ws.Store.Owners(t.Context())
		ids := map[string]bool{}
		for _, o := range owners {
			ids[o.ID] = true
		}
		return err == nil && len(owners) == partitions && len(ids) == len(h.ws.URLs)
	})
	for p := range int32(partitions) {
		key := probeKey(p)
		testenv.WaitForNil(t, 60*time.Second, "a write on partition "+strconv.Itoa(int(p)), func() error { return h.probe(key) })
	}
}

// probeKey is a key of partition p outside every scenario's project.
func probeKey(p int32) string {
	for i := 0; ; i++ {
		scope := fmt.Sprintf("tenant/conformance/project/settle-%d", i)
		if changelog.Partition(scope, partitions) == p {
			return scope + "/probe"
		}
	}
}

// probe writes key through the proxy.
func (h *harness) probe(key string) error {
	req, err := http.NewRequest(http.MethodPut, h.url+"/v1/kv/"+key, strings.NewReader(`{"value":1}`))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT %s: %s %s", key, resp.Status, b)
	}
	return nil
}

var probeClient = &http.Client{Timeout: 10 * time.Second}

// run runs client r's runner for scenario sc, failing t with its output
// when it exits non-zero or outlasts scenarioTimeout.
func (h *harness) run(t *testing.T, r runner, sc string) {
	if _, err := os.Stat(filepath.Join(h.root, r.file)); err != nil {
		t.Fatalf("the %s runner is missing: %v", r.client, err)
	}
	if r.built != "" {
		if _, err := os.Stat(filepath.Join(h.root, r.built)); err != nil {
			t.Fatalf("the %s runner imports %s, which is not built: %v\nSolution: %s", r.client, r.built, err, r.build)
		}
	}
	argv, err := r.argv(h)
	if err != nil {
		t.Fatalf("the %s runner: %v", r.client, err)
	}
	if _, err := exec.LookPath(argv[0]); err != nil {
		t.Fatalf("the %s runner needs %s: %v", r.client, argv[0], err)
	}
	prefix := fmt.Sprintf("tenant/conformance/project/%s-%s/", r.client, sc)
	if exclusive[sc] {
		h.kills.Lock()
		defer h.kills.Unlock()
		defer h.settle(t)
		h.aimAtOwner(t, prefix)
	} else {
		h.kills.RLock()
		defer h.kills.RUnlock()
	}
	ctx, cancel := context.WithTimeout(t.Context(), scenarioTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], append(argv[1:], sc)...)
	cmd.Dir = h.root
	cmd.Env = append(proc.BaseEnv(), "ESKV_URL="+h.url, "ESKV_TOKEN="+token, "ESKV_CONTROL="+h.control,
		"ESKV_PREFIX="+prefix)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start).Round(time.Millisecond)
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s: %w", scenarioTimeout, errors.Join(err, ctx.Err()))
	}
	if err != nil {
		t.Fatalf("%s %s: %v after %s\n--- stdout ---\n%s--- stderr ---\n%s", r.client, sc, err, took, stdout.String(), stderr.String())
	}
	t.Logf("%s %s passed in %s:\n%s", r.client, sc, took, stdout.String())
}

// aimAtOwner makes the proxy send to the writer that owns prefix's
// partition, so that kill-writer cuts the scenario's streams and moves
// its partition to the other writer: its writes ride out a takeover, not
// only a proxy's fail-over.
func (h *harness) aimAtOwner(t *testing.T, prefix string) {
	scope := strings.TrimSuffix(prefix, "/")
	p := changelog.Partition(scope, partitions)
	owners, err := h.ws.Store.Owners(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range owners {
		for i := range h.ws.URLs {
			if o.Partition == p && o.ID == h.proxy.Name(i) {
				h.proxy.Prefer(i)
				t.Logf("%s: partition %d, owned by %s, which the proxy sends to", scope, p, o.ID)
				return
			}
		}
	}
	t.Fatalf("%s: no writer of the stack owns partition %d (owners %+v)", scope, p, owners)
}

// goRunner builds conformance/gorunner once and returns the binary.
func (h *harness) goRunner() ([]string, error) {
	h.buildOnce.Do(func() {
		dir := h.t.TempDir()
		h.goBin = filepath.Join(dir, "gorunner")
		if err := proc.Build(context.Background(), h.root, dir, "./conformance/gorunner"); err != nil {
			h.goErr = fmt.Errorf("building it: %w", err)
		}
	})
	return []string{h.goBin}, h.goErr
}

// postControl POSTs to the control API and decodes its JSON answer.
func postControl(t *testing.T, u string, out any) {
	t.Helper()
	resp, err := http.Post(u, "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s: %s", u, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatal(err)
	}
}
