// Command eskvchaos is eskv's fault harness (make chaos). It starts a stack
// of real processes — the dev broker, three writers and two projectors on a
// fresh Postgres database — runs concurrent clients doing compare-and-swap
// operations on a few keys through random writers, and meanwhile kills
// (SIGKILL) and restarts writers and projectors, and pauses them (SIGSTOP,
// then SIGCONT) long enough for a paused writer to lose its partitions and
// come back as a zombie. Afterwards it checks that the recorded history is
// linearizable per key (porcupine), that no acknowledged write is lost, that
// versions per key in kv.changes are contiguous and unique, that no zombie
// write was committed, and that the live projection equals a rebuild from
// the log. It prints what it did and found and exits non-zero when any
// check fails.
//
// With -throughput it measures write throughput with three writers and
// with one instead, on the same stack, and prints the ratio.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C exits at once; the services die with us (Pdeathsig)
	}()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "eskvchaos:", err)
		os.Exit(1)
	}
}

// config is the harness's configuration; every field is a flag whose
// default comes from an environment variable.
type config struct {
	duration    time.Duration
	seed        uint64
	clients     int
	keys        int
	writers     int
	projectors  int
	partitions  int
	opTimeout   time.Duration
	faultEvery  span
	writerPause span
	projPause   span
	restartIn   span
	faults      []string
	killBroker  bool

	throughput         bool
	throughputDuration time.Duration
	throughputClients  int

	adminPostgresURL string
	checkTimeout     time.Duration
	keep             bool
	logLevel         string
}

// span is a duration range "min-max"; a value is drawn uniformly from it.
type span struct{ min, max time.Duration }

func (s span) String() string { return s.min.String() + "-" + s.max.String() }

func parseSpan(v string) (span, error) {
	lo, hi, ok := strings.Cut(v, "-")
	if !ok {
		hi = lo
	}
	a, err := time.ParseDuration(strings.TrimSpace(lo))
	if err != nil {
		return span{}, fmt.Errorf("%q: %w", v, err)
	}
	b, err := time.ParseDuration(strings.TrimSpace(hi))
	if err != nil {
		return span{}, fmt.Errorf("%q: %w", v, err)
	}
	if a < 0 || b < a {
		return span{}, fmt.Errorf("%q: want min-max with 0 <= min <= max", v)
	}
	return span{a, b}, nil
}

// faultKinds are the faults injected by default, in the order -h lists
// them. kill-broker is added by -kill-broker.
var faultKinds = []string{faultKillWriter, faultPauseWriter, faultKillProjector, faultPauseProjector}

const (
	faultKillWriter     = "kill-writer"
	faultPauseWriter    = "pause-writer"
	faultKillProjector  = "kill-projector"
	faultPauseProjector = "pause-projector"
	faultKillBroker     = "kill-broker"
)

func parse(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	env := func(names ...string) string {
		for _, n := range names {
			if v := getenv(n); v != "" {
				return v
			}
		}
		return ""
	}
	or := func(v, def string) string {
		if v == "" {
			return def
		}
		return v
	}
	var c config
	fs := flag.NewFlagSet("eskvchaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `usage: eskvchaos [flags]   (make chaos; CHAOS_SECONDS=60 make chaos)

Builds and starts the dev broker, writers and projectors as processes on free
ports with a fresh Postgres database, runs CAS clients through random writers
while killing (SIGKILL) and pausing (SIGSTOP/SIGCONT) writers and projectors,
then checks: linearizability per key (porcupine), no acknowledged write lost,
contiguous and unique versions in kv.changes, no write committed by a writer
paused past its ownership (zombie), live projection = rebuild from the log.
Exits non-zero when a check fails; logs, history and (on a linz.Result
failure) porcupine's HTML view are then kept in the run directory it prints.

The broker is not killed unless -kill-broker: kfake (the dev broker) does not
keep transaction state across a crash the way Kafka does — after a restart an
open transaction may no longer be tied to its transactional id and be
committed by the next epoch's marker, and the last stable offset can go back —
so a broker kill tests kfake, not eskv. See docs/chaos.md.

With -throughput it measures write throughput with all writers and with one,
without faults, and prints the ratio instead.

`)
		fs.PrintDefaults()
	}
	var seconds, seed, faults, faultEvery, writerPause, projPause, restartIn string
	fs.StringVar(&seconds, "seconds", or(env("ESKV_CHAOS_SECONDS", "CHAOS_SECONDS"), "120"), "length of the fault phase in seconds (ESKV_CHAOS_SECONDS or CHAOS_SECONDS)")
	fs.StringVar(&seed, "seed", env("ESKV_CHAOS_SEED"), "random seed of clients and faults; empty: from the clock (printed, to replay a schedule) (ESKV_CHAOS_SEED)")
	fs.IntVar(&c.clients, "clients", envInt(env("ESKV_CHAOS_CLIENTS"), 12), "concurrent CAS clients (ESKV_CHAOS_CLIENTS)")
	fs.IntVar(&c.keys, "keys", envInt(env("ESKV_CHAOS_KEYS"), 5), "keys the clients share, each in its own project and partition when possible (ESKV_CHAOS_KEYS)")
	fs.IntVar(&c.writers, "writers", envInt(env("ESKV_CHAOS_WRITERS"), 3), "writer processes (ESKV_CHAOS_WRITERS)")
	fs.IntVar(&c.projectors, "projectors", envInt(env("ESKV_CHAOS_PROJECTORS"), 2), "projector processes (ESKV_CHAOS_PROJECTORS)")
	fs.IntVar(&c.partitions, "partitions", envInt(env("ESKV_PARTITIONS"), 12), "partition count of kv.changes (ESKV_PARTITIONS)")
	fs.DurationVar(&c.opTimeout, "op-timeout", envDur(env("ESKV_CHAOS_OP_TIMEOUT"), 2*time.Second), "client timeout of one operation; a write that times out has an unknown outcome (ESKV_CHAOS_OP_TIMEOUT)")
	fs.StringVar(&faultEvery, "fault-every", or(env("ESKV_CHAOS_FAULT_EVERY"), "2s-5s"), "time between two faults, min-max (ESKV_CHAOS_FAULT_EVERY)")
	fs.StringVar(&writerPause, "writer-pause", or(env("ESKV_CHAOS_WRITER_PAUSE"), "14s-17s"), "how long a writer stays stopped (SIGSTOP); longer than the writers' 10s session timeout, so its partitions move and it resumes as a zombie (ESKV_CHAOS_WRITER_PAUSE)")
	fs.StringVar(&projPause, "projector-pause", or(env("ESKV_CHAOS_PROJECTOR_PAUSE"), "2s-13s"), "how long a projector stays stopped (ESKV_CHAOS_PROJECTOR_PAUSE)")
	fs.StringVar(&restartIn, "restart-after", or(env("ESKV_CHAOS_RESTART_AFTER"), "500ms-3s"), "delay before a killed process is started again (ESKV_CHAOS_RESTART_AFTER)")
	fs.StringVar(&faults, "faults", or(env("ESKV_CHAOS_FAULTS"), strings.Join(faultKinds, ",")), "fault kinds to inject, comma-separated; empty or none: no faults (ESKV_CHAOS_FAULTS)")
	fs.BoolVar(&c.killBroker, "kill-broker", env("ESKV_CHAOS_KILL_BROKER") == "true", "also SIGKILL and restart the broker; off by default because kfake loses transaction state in a crash (see above) (ESKV_CHAOS_KILL_BROKER)")
	fs.BoolVar(&c.throughput, "throughput", env("ESKV_CHAOS_THROUGHPUT") == "true", "measure write throughput with all writers against one writer instead of injecting faults (ESKV_CHAOS_THROUGHPUT)")
	fs.DurationVar(&c.throughputDuration, "throughput-duration", envDur(env("ESKV_CHAOS_THROUGHPUT_DURATION"), 15*time.Second), "length of each throughput measurement (ESKV_CHAOS_THROUGHPUT_DURATION)")
	fs.IntVar(&c.throughputClients, "throughput-clients", envInt(env("ESKV_CHAOS_THROUGHPUT_CLIENTS"), 48), "concurrent writing clients of the throughput measurement (ESKV_CHAOS_THROUGHPUT_CLIENTS)")
	fs.StringVar(&c.adminPostgresURL, "admin-postgres-url", or(env("ESKV_TEST_POSTGRES_URL"), "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "Postgres URL with the right to create and drop the run's database (ESKV_TEST_POSTGRES_URL)")
	fs.DurationVar(&c.checkTimeout, "check-timeout", envDur(env("ESKV_CHAOS_CHECK_TIMEOUT"), 5*time.Minute), "give up the linearizability check after this long (the verdict is then unknown, a failure) (ESKV_CHAOS_CHECK_TIMEOUT)")
	fs.StringVar(&c.logLevel, "log-level", or(env("ESKV_CHAOS_LOG_LEVEL"), "warn"), "log level of the services (at info a writer logs every write) (ESKV_CHAOS_LOG_LEVEL)")
	fs.BoolVar(&c.keep, "keep", env("ESKV_CHAOS_KEEP") == "true", "keep the run directory and database also when every check passes (ESKV_CHAOS_KEEP)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	s, err := strconv.ParseFloat(seconds, 64)
	if err != nil || s <= 0 {
		return c, fmt.Errorf("-seconds (CHAOS_SECONDS) must be a positive number, got %q", seconds)
	}
	c.duration = time.Duration(s * float64(time.Second))
	if seed == "" {
		c.seed = uint64(time.Now().UnixNano())
	} else if c.seed, err = strconv.ParseUint(seed, 10, 64); err != nil {
		return c, fmt.Errorf("-seed must be an unsigned integer, got %q", seed)
	}
	for _, sp := range []struct {
		name string
		v    string
		dst  *span
	}{{"fault-every", faultEvery, &c.faultEvery}, {"writer-pause", writerPause, &c.writerPause},
		{"projector-pause", projPause, &c.projPause}, {"restart-after", restartIn, &c.restartIn}} {
		if *sp.dst, err = parseSpan(sp.v); err != nil {
			return c, fmt.Errorf("-%s: %w", sp.name, err)
		}
	}
	if c.faultEvery.max <= 0 {
		return c, errors.New("-fault-every must be positive")
	}
	known := map[string]bool{faultKillBroker: true}
	for _, k := range faultKinds {
		known[k] = true
	}
	for _, f := range strings.Split(faults, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "" || f == "none":
		case !known[f]:
			return c, fmt.Errorf("-faults: unknown fault %q (known: %s, %s)", f, strings.Join(faultKinds, ", "), faultKillBroker)
		default:
			c.faults = append(c.faults, f)
		}
	}
	if c.killBroker {
		c.faults = append(c.faults, faultKillBroker)
	}
	switch {
	case c.clients < 1 || c.keys < 1 || c.partitions < 1:
		return c, errors.New("-clients, -keys and -partitions must be positive")
	case c.writers < 1 || c.projectors < 1:
		return c, errors.New("-writers and -projectors must be at least 1")
	case c.opTimeout <= 0 || c.checkTimeout <= 0:
		return c, errors.New("-op-timeout and -check-timeout must be positive")
	case c.throughput && (c.writers < 2 || c.throughputDuration <= 0 || c.throughputClients < 1):
		return c, errors.New("-throughput needs at least 2 writers, a positive -throughput-duration and -throughput-clients")
	}
	return c, nil
}

func envInt(v string, def int) int {
	if n, err := strconv.Atoi(v); err == nil {
		return n
	}
	return def
}

func envDur(v string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(v); err == nil {
		return d
	}
	return def
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	c, err := parse(args, getenv, stderr)
	if err != nil {
		return err
	}
	s, err := startStack(ctx, c, stderr)
	if err != nil {
		return err
	}
	failed := true
	defer func() {
		s.close(c.keep || failed)
	}()
	if c.throughput {
		err = runThroughput(ctx, c, s, stdout, stderr)
	} else {
		err = runChaos(ctx, c, s, stdout, stderr)
	}
	if err != nil {
		s.printLogTails(stderr)
		return err
	}
	failed = false
	return nil
}

// errChecksFailed is run's error when the harness ran but a check failed.
var errChecksFailed = errors.New("checks failed")
