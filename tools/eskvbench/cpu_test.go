package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseStat(t *testing.T) {
	// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
	comm, cpu, err := parseStat("2207 (clickhouse-serv) S 1 2206 2206 0 -1 4194560 100 0 0 0 1234 66 0 0 20 0 8 0")
	if err != nil || comm != "clickhouse-serv" || cpu != 13 {
		t.Errorf("got %q %v %v; want clickhouse-serv 13", comm, cpu, err)
	}
	comm, _, err = parseStat("42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 125 0 0 20 0 8 0")
	if err != nil || comm != "my (odd) name" {
		t.Errorf("got %q %v; want the whole name", comm, err)
	}
	if _, _, err := parseStat("42 x S"); err == nil {
		t.Error("no command name: want an error")
	}
}

func TestPostgresKind(t *testing.T) {
	const db = "eskvbench_0123abcd"
	for _, c := range []struct {
		comm, cmdline, want string
	}{
		{"postgres", "/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main -c config_file=/etc/postgresql/15/main/postgresql.conf", kindPostgresBg},
		{"postgres", "postgres: 15/main: walwriter", kindPostgresBg},
		{"postgres", "postgres: 15/main: logical replication launcher", kindPostgresBg},
		{"postgres", "postgres: 15/main: postgres eskvbench_0123abcd 127.0.0.1(41234) idle", kindPostgres},
		{"postgres", "postgres: postgres eskvbench_0123abcd [local] UPDATE", kindPostgres},
		{"postgres", "postgres: 15/main: postgres eskv_t_99 127.0.0.1(41236) idle in transaction", kindPostgresOther},
		{"postgres", "postgres: 15/main: autovacuum worker eskv_t_99", kindPostgresBg},
		{"writer", "/tmp/eskvbench-1/bin/writer", ""},
		{"psql", "postgres: 15/main: postgres eskvbench_0123abcd 127.0.0.1(1) idle", ""},
	} {
		if got := postgresKind(procInfo{Comm: c.comm, Cmdline: c.cmdline}, db); got != c.want {
			t.Errorf("%s %q: got %q, want %q", c.comm, c.cmdline, got, c.want)
		}
	}
	if clickhouseKind(procInfo{Comm: "clickhouse-serv"}) != kindClickHouse || clickhouseKind(procInfo{Comm: "postgres"}) != "" {
		t.Error("clickhouseKind")
	}
}

func TestCPUDelta(t *testing.T) {
	classify := func(p procInfo) string {
		return map[int]string{1: "writer", 2: "postgres", 3: "postgres", 4: "postgres", 5: kindLoadGenerator, 6: kindPostgresOther}[p.PID]
	}
	// 4 and 6 exit during the run: only 4 is of a counted kind.
	before := cpuSample{1: {PID: 1, Comm: "writer", CPU: 1.5}, 2: {PID: 2, Comm: "postgres", CPU: 4}, 4: {PID: 4, Comm: "postgres", CPU: 9},
		5: {PID: 5, Comm: "eskvbench", CPU: 1}, 6: {PID: 6, Comm: "postgres", CPU: 2}}
	after := cpuSample{1: {PID: 1, Comm: "writer", CPU: 2.5}, 2: {PID: 2, Comm: "postgres", CPU: 4.25},
		3: {PID: 3, Comm: "postgres", CPU: 0.5}, // started during the run: all of it counts
		5: {PID: 5, Comm: "eskvbench", CPU: 3}}
	d := after.since(before, classify)
	if d.Seconds["writer"] != 1 || d.Seconds["postgres"] != 0.75 || d.Seconds[kindLoadGenerator] != 2 || d.Exited != 1 {
		t.Fatalf("got %+v", d)
	}
	r := newCPUReport(d, 2500, 2)
	// The load generator is shown but not counted: 1.75 s / 2500 writes.
	if r.TotalSeconds != 1.75 || r.MicrosPerWrite != 700 || r.Writes != 2500 {
		t.Errorf("report %+v", r)
	}
	if r.Kinds[0].Kind != kindLoadGenerator || r.Kinds[0].Counted || r.Kinds[1].Kind != "writer" || !r.Kinds[1].Counted {
		t.Errorf("kinds %+v: want the largest first, the load generator not counted", r.Kinds)
	}
	var out bytes.Buffer
	r.print(&out, "  ")
	for _, want := range []string{"writer 1.00 s, postgres 0.75 s", "total 1.75 CPU-s", "700 µs CPU per acknowledged write",
		"not counted: " + kindLoadGenerator + " 2.00 s", "1 counted processes exited"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("print: no %q in\n%s", want, out.String())
		}
	}
}

// TestSampleCPUReadsProc reads the real /proc: the test process is found
// with its command name and command line.
func TestSampleCPUReadsProc(t *testing.T) {
	self := os.Getpid()
	s := sampleCPU("/proc", func(p procInfo) string {
		if p.PID == self {
			return "self"
		}
		return ""
	})
	p, ok := s[self]
	if len(s) != 1 || !ok {
		t.Fatalf("got %d processes, self found %v", len(s), ok)
	}
	exe, _ := os.Executable()
	if p.Comm == "" || !strings.Contains(p.Cmdline, exe) || p.CPU < 0 {
		t.Errorf("self: %+v (executable %s)", p, exe)
	}
}

func TestMachineCPU(t *testing.T) {
	root := t.TempDir()
	write := func(line string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "stat"), []byte(line+"\ncpu0 1 2 3 4\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// user nice system idle iowait irq softirq steal guest guest_nice
	write("cpu  100 0 50 800 40 0 10 0 30 0")
	before, ok := readMachineCPU(root)
	if !ok || before.busy != 160 || before.total != 1000 {
		t.Fatalf("before = %+v, %v; want busy 160 of 1000 (guest not counted twice)", before, ok)
	}
	write("cpu  150 0 70 900 60 0 10 10 30 0")
	after, _ := readMachineCPU(root)
	if got := after.busyShare(before); got != 80.0/200 {
		t.Fatalf("busyShare = %v, want 0.4 (80 busy of 200, steal busy, iowait not)", got)
	}
	if got := after.stealShare(before); got != 10.0/200 {
		t.Fatalf("stealShare = %v, want 0.05 (10 stolen of 200)", got)
	}
	if got := after.busyShare(after); got != 0 {
		t.Fatalf("busyShare over no time = %v, want 0", got)
	}
	write("intr 1 2 3")
	if _, ok := readMachineCPU(root); ok {
		t.Fatal("readMachineCPU accepted a stat without its cpu line")
	}
}

// TestTopKinds: a window's three processes with the most CPU per write,
// named short, the uncounted ones left out.
func TestTopKinds(t *testing.T) {
	r := newCPUReport(cpuDelta{Seconds: map[string]float64{"writer": 0.5, "postgres (backends of the run's database)": 0.25,
		"devbroker": 0.125, "projector": 0.0625, kindLoadGenerator: 2}}, 5000, 1)
	if got, want := r.topKinds(3), "writer 100, postgres 50, devbroker 25"; got != want {
		t.Errorf("topKinds(3) = %q, want %q", got, want)
	}
	if got := (&cpuReport{}).topKinds(3); got != "-" {
		t.Errorf("without writes: %q, want -", got)
	}
	if got := r.microsPerWrite(kindLoadGenerator); got != 400 {
		t.Errorf("the load generator's µs per write = %v, want 400", got)
	}
	if got := r.microsPerWrite("auditor"); got != 0 {
		t.Errorf("a kind not measured: %v, want 0", got)
	}
}
