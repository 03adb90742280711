package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/tools/internal/localstack"
)

// The peer tests start real peers. Redis (Debian's redis-server) and the
// plain Postgres table run in make test: a missing redis-server fails the
// test, naming scripts/ensure-peers.sh (skipped only with
// ESKV_UNIT_ONLY=1 outside CI, as testenv does for services). etcd and
// NATS need scripts/ensure-peers.sh first: their tests carry the build
// tag peers (go test -tags peers ./eskvbench).

// mustStartPeer starts peer name or fails the test saying how to install
// it.
func mustStartPeer(t *testing.T, name string) system {
	t.Helper()
	pc := peerConfig{adminPostgresURL: os.Getenv("ESKV_TEST_POSTGRES_URL"), clients: 4}
	if pc.adminPostgresURL == "" {
		pc.adminPostgresURL = testenv.DefaultPostgresURL
	}
	sys, err := startPeer(t.Context(), name, pc)
	if err != nil {
		if os.Getenv("ESKV_UNIT_ONLY") == "1" && os.Getenv("CI") != "true" {
			t.Skipf("ESKV_UNIT_ONLY=1 and peer %s is unavailable: %v", name, err)
		}
		t.Fatalf("peer %s did not start (bash scripts/ensure-peers.sh installs the peers; Postgres: see testenv): %v", name, err)
	}
	return sys
}

// serverOf is the server process a peer target started (nil for the
// Postgres table, which uses the shared server).
func serverOf(target casTarget) *peerServer {
	switch t := target.(type) {
	case *redisTarget:
		return t.srv
	case *natsTarget:
		return t.srv
	case *etcdTarget:
		return t.srv
	}
	return nil
}

// testPeer starts peer name, checks its read and compare-and-swap (a
// stale revision is a conflict, not an error), drives the load loop on
// it briefly, and stops it: the server has exited and its directory is
// gone.
func testPeer(t *testing.T, name string) {
	ctx := t.Context()
	sys := mustStartPeer(t, name)
	closed := false
	defer func() {
		if !closed {
			sys.target.close()
		}
	}()
	if sys.name != name || sys.version == "?" || sys.classify == nil {
		t.Errorf("system %+v: want name %s, a version, a classifier", sys, name)
	}
	keys := []string{"tenant/bench/project/p-0/cas-k000", "tenant/bench/project/p-1/cas-k001"}
	if err := sys.target.setup(ctx, keys); err != nil {
		t.Fatal(err)
	}
	val, rev, err := sys.target.read(ctx, keys[0])
	if err != nil || string(val) != `{"seq":0}` {
		t.Fatalf("read: %q %d %v", val, rev, err)
	}
	if ok, err := sys.target.cas(ctx, keys[0], []byte(`{"seq":1}`), rev); !ok || err != nil {
		t.Fatalf("cas at the read revision: %v %v", ok, err)
	}
	if ok, err := sys.target.cas(ctx, keys[0], []byte(`{"seq":2}`), rev); ok || err != nil {
		t.Fatalf("cas at a stale revision: %v %v; want a conflict", ok, err)
	}
	val2, rev2, err := sys.target.read(ctx, keys[0])
	if err != nil || string(val2) != `{"seq":1}` || rev2 == rev {
		t.Fatalf("read after cas: %q %d (before %d) %v", val2, rev2, rev, err)
	}
	// One client per key: every CAS succeeds.
	out := driveCAS(ctx, sys.target, keys, 2, 300*time.Millisecond)
	if out.OK == 0 || out.Errors != 0 || out.Conflicts != 0 {
		t.Errorf("load loop: %+v", out)
	}
	srv := serverOf(sys.target)
	if srv != nil && sys.classify(procInfo{PID: srv.p.PID()}) != name+"-server" {
		t.Errorf("the server's pid is not classified as %s-server", name)
	}
	sys.target.close()
	closed = true
	if srv != nil {
		if srv.p.Alive() {
			t.Error("server still running after close")
		}
		if _, err := os.Stat(srv.dir); !os.IsNotExist(err) {
			t.Errorf("server directory %s: %v; want it removed", srv.dir, err)
		}
	}
}

func TestPeerRedis(t *testing.T)    { testPeer(t, "redis") }
func TestPeerPostgres(t *testing.T) { testPeer(t, "postgres") }

// TestStartServerFails: a server that exits before it listens is an
// error carrying its log, and its directory is removed.
func TestStartServerFails(t *testing.T) {
	name := "failing-" + localstack.RandomHex(4)
	_, err := startServer(t.Context(), name, "/bin/sh", 1, func(dir string, ports []int) []string {
		return []string{"-c", "echo cannot bind; exit 3"}
	})
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "cannot bind") {
		t.Fatalf("got %v; want the exit and the log's tail", err)
	}
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "eskvbench-"+name+"-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

func TestFindBinary(t *testing.T) {
	if p, err := findBinary("", "no-such-binary-eskv", "sh"); err != nil || !strings.HasSuffix(p, "/sh") {
		t.Errorf("got %q %v; want sh from PATH", p, err)
	}
	if _, err := findBinary("no-such-binary-eskv"); err == nil || !strings.Contains(err.Error(), "ensure-peers.sh") {
		t.Errorf("got %v; want an error naming ensure-peers.sh", err)
	}
}

func TestVersionOf(t *testing.T) {
	for in, want := range map[string]string{
		"etcd Version: 3.4.23\nGit SHA: Not provided":                        "3.4.23",
		"Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64": "7.0.15",
		"nats-server: v2.15.2":           "2.15.2",
		"15.20 (Debian 15.20-0+deb12u1)": "15.20",
		"command not found":              "?",
	} {
		if got := versionOf(in); got != want {
			t.Errorf("versionOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParsePeers(t *testing.T) {
	got, err := parsePeers(" redis, etcd ,redis")
	if err != nil || strings.Join(got, ",") != "redis,etcd" {
		t.Errorf("got %v %v", got, err)
	}
	if got, err := parsePeers("none"); err != nil || len(got) != 0 {
		t.Errorf("none: got %v %v", got, err)
	}
	if _, err := parsePeers("redis,mongo"); err == nil {
		t.Error("unknown peer: want an error")
	}
	c, err := parse([]string{"-only", "18", "-peers", "nats", "-peer-duration", "1s"}, io.Discard)
	if err != nil || !c.wants("18") || c.wants("2") || len(c.peers) != 1 || c.peerDuration != time.Second || c.peerClients != 64 {
		t.Errorf("parse: %+v %v", c, err)
	}
}

func TestPrintPeers(t *testing.T) {
	eskvCPU := newCPUReport(cpuDelta{Seconds: map[string]float64{"writer": 3, kindPostgres: 1, kindLoadGenerator: 2}}, 10000, 8)
	r := &report{Peers: &peerFigure{Note: peerNote, Rows: []peerRow{
		{Step: "18a", Scenario: "64 clients", System: "eskv", Version: "this tree", CPU: eskvCPU,
			casOutcome: casOutcome{OK: 10000, OKPerSec: 1250, P50: ms(12 * time.Millisecond), P99: ms(40 * time.Millisecond)}},
		{Step: "18a", Scenario: "64 clients", System: "redis", Version: "7.0.15",
			casOutcome: casOutcome{OK: 20000, OKPerSec: 2500, Conflicts: 8, ConflictsPerSec: 1}},
		{Step: "18", Scenario: "-", System: "etcd", Unavailable: "none of etcd found"},
		{Step: "18a", Scenario: "64 clients", System: "eskv", Version: "this tree, again", Again: true, CPU: eskvCPU,
			casOutcome: casOutcome{OK: 6000, OKPerSec: 750}},
	}}}
	var out strings.Builder
	if err := r.printPeers(&out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"unavailable: none of etcd found", "0.40×", "0.80×", "1.33×", "12.0ms", "40.0ms", "400",
		"eskv's CPU over 18a", "writer 3.00 s, " + kindPostgres + " 1.00 s", "= 400 µs CPU per acknowledged write",
		"not counted: " + kindLoadGenerator, "eskv's CPU over 18a (64 clients, again after the peers)",
		"eskv's 18a before and after the peers: 1250 and 750 ok/s (after ÷ before 0.60); over both, 500 µs CPU per acknowledged write"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
	// With the machine probe's medians of both runs, the line says how
	// much slower the machine itself was after the peers.
	r.Peers.Rows[0].Machine = machineSpeed{HashNsPerKiB: 800, WalkNs: 100, Samples: 8}
	r.Peers.Rows[3].Machine = machineSpeed{HashNsPerKiB: 880, WalkNs: 100, Samples: 6}
	out.Reset()
	if err := r.printPeers(&out); err != nil {
		t.Fatal(err)
	}
	if want := "(after ÷ before 0.60; the machine probe's time after ÷ before 1.10 (hash), 1.00 (memory)); over both"; !strings.Contains(out.String(), want) {
		t.Errorf("no %q in\n%s", want, out.String())
	}
	// eskv's 18a is the mean of its two runs: 1,000 ok/s.
	if r.Peers.Rows[0].Ratio != 0.8 || r.Peers.Rows[1].Ratio != 0.4 || r.Peers.Rows[2].Ratio != 0 || r.Peers.Rows[3].Ratio != 1000.0/750 {
		t.Errorf("ratios: %+v", r.Peers.Rows)
	}
}

func TestStartPeerUnknown(t *testing.T) {
	if _, err := startPeer(t.Context(), "mongo", peerConfig{}); err == nil || !strings.Contains(err.Error(), "postgres, etcd, nats, redis") {
		t.Errorf("got %v", err)
	}
}
