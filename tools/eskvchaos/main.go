// Command eskvchaos is eskv's fault harness (make chaos). It starts a stack
// of real processes — the dev broker, three writers and two projectors on a
// fresh Postgres database — runs concurrent clients doing compare-and-swap
// operations on a few keys through random writers, and meanwhile kills
// (SIGKILL) and restarts writers and projectors, and pauses them (SIGSTOP,
// then SIGCONT) long enough for a paused writer to lose its partitions and
// come back as a zombie. Afterwards it checks that the recorded history is
// linearizable per key (porcupine), that every listing of a project (clients
// also put, delete and list keys beside the registers) held every write
// acknowledged before it began (linz.CheckListings), that no acknowledged
// write is lost, that versions per key in kv.changes are contiguous and
// unique, that no zombie write was committed, that the live projection
// equals a rebuild from the log, and that transfers between accounts
// (transactions, txn.go) kept them summing to 0 in every listing, in the
// log and in the projection, each transaction whole in the log, and that
// sets (sets.go) and lists (lists.go) hold in the log and the projection
// exactly what their acknowledged changes imply, and that queues
// (queues.go) deliver every item at least once, never to two consumers
// while its visibility holds, and are acknowledged once; that watchers
// (watch.go) received exactly the log's records of their prefixes, and
// that history reads (history.go) held every write acknowledged before
// they began, contiguous and in order. It prints
// what it did and found and exits non-zero when any check fails.
//
// With -throughput it measures write throughput with three writers and
// with one instead, on the same stack, and prints the ratio. With -hostile
// it runs the hostile-load phase instead of faults (hostile.go).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/tools/internal/cli"
)

func main() { service.Main("eskvchaos", run) }

// config is the harness's configuration; every field is a flag whose
// default comes from an environment variable.
type config struct {
	duration     time.Duration
	seed         uint64
	clients      int
	txnClients   int
	setClients   int
	listClients  int
	queueClients int
	lockClients  int
	// sessionClients run the session workload (sessions.go).
	sessionClients int
	watchClients   int
	informers      int // informer clients (informer.go)
	historyEvery   int
	keys           int
	writers        int
	projectors     int
	partitions     int
	opTimeout      time.Duration
	faultEvery     span
	writerPause    span
	projPause      span
	restartIn      span
	faults         []string
	killBroker     bool
	netFaults      bool
	// auditor runs an auditor into a fresh ClickHouse database at
	// clickhouseAddr and checks its trail (auditor verify) at the end.
	auditor        bool
	clickhouseAddr string
	netCut         span // how long a cut lasts: some past the 10 s session timeout, so partitions move
	depStall       span

	throughput         bool
	throughputDuration time.Duration
	throughputClients  int

	hostile         bool
	hostileDuration time.Duration
	hostileAttacks  []string

	adminPostgresURL string
	checkTimeout     time.Duration
	keep             bool
	logLevel         string
}

// span is a duration range "min-max"; a value is drawn uniformly from it.
type span struct{ min, max time.Duration }

func (s span) String() string { return s.min.String() + "-" + s.max.String() }

// Set parses v as a span (flag.Value).
func (s *span) Set(v string) (err error) {
	*s, err = parseSpan(v)
	return err
}

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
// them; netFaultKinds need -net-faults (netns.go). kill-broker is added
// by -kill-broker.
var (
	faultKinds = []string{faultKillWriter, faultPauseWriter, faultTwinWriter, faultKillProjector, faultPauseProjector,
		faultPauseBroker, faultStallPostgres}
	netFaultKinds = []string{faultCutWriterBroker, faultCutWriterPostgres, faultCutWriterWriter, faultCutClientWriter,
		faultCutProjectorBroker, faultCutAuditorClickHouse}
)

const (
	faultKillWriter     = "kill-writer"
	faultPauseWriter    = "pause-writer"
	faultTwinWriter     = "twin-writer"
	faultKillProjector  = "kill-projector"
	faultPauseProjector = "pause-projector"
	faultKillBroker     = "kill-broker"
	// faultPauseBroker stops the broker (SIGSTOP): every request to it
	// hangs.
	faultPauseBroker = "pause-broker"
	// faultStallPostgres holds an ACCESS EXCLUSIVE lock on a projection
	// table of the run's database, or stops (SIGSTOP) the run database's
	// backends: Postgres stops answering the services, not the machine.
	faultStallPostgres = "stall-postgres"
	// The cuts of -net-faults: a writer and the broker (both ways, the
	// writer's requests only, or the broker's answers only), a writer
	// and Postgres, two writers (forwarding), a writer's answers to the
	// clients (the outcome of the requests under way lost), a projector
	// and the broker.
	faultCutWriterBroker    = "cut-writer-broker"
	faultCutWriterPostgres  = "cut-writer-postgres"
	faultCutWriterWriter    = "cut-writer-writer"
	faultCutClientWriter    = "cut-client-writer"
	faultCutProjectorBroker = "cut-projector-broker"
	// faultCutAuditorClickHouse cuts the auditor's packets to ClickHouse
	// (needs -auditor).
	faultCutAuditorClickHouse = "cut-auditor-clickhouse"
)

const usage = `usage: eskvchaos [flags]   (make chaos; CHAOS_SECONDS=60 make chaos)

Builds and starts the dev broker, writers and projectors as processes on free
ports with a fresh Postgres database, runs CAS clients and transfer clients
(transactions of two conditioned puts) through random writers while killing
(SIGKILL) and pausing (SIGSTOP/SIGCONT) writers and projectors, then checks:
linearizability per key (porcupine), listings that hold every write
acknowledged before they began, no acknowledged write lost, contiguous and
unique versions in kv.changes, no write committed by a writer paused past
its ownership (zombie), live projection = rebuild from the log, transfers
that keep their accounts summing to 0 and whole transactions in the log,
sets whose metadata and projected members equal the fold of the log
(set clients: sadd, srem, sismember), and lists whose metadata, popped
values and projected values equal the fold of the log (list clients:
lpush, rpush, lpop, rpop, ltrim), watchers that receive exactly the log's
records of their prefixes (client.Watch across writer kills and pauses),
informers whose caches (client.ListWatch: list, then watch after the
listing's position) miss and repeat no version and end equal to the
projection,
and history reads that hold every write acknowledged before they began.
Exits non-zero when a check fails; logs, history and (on a linz.Result
failure) porcupine's HTML view are then kept in the run directory it prints.

The broker is not killed unless -kill-broker: kfake (the dev broker) does not
keep transaction state across a crash the way Kafka does — after a restart an
open transaction may no longer be tied to its transactional id and be
committed by the next epoch's marker, and the last stable offset can go back —
so a broker kill tests kfake, not eskv. See docs/chaos.md.

With -throughput it measures write throughput with all writers and with one,
without faults, and prints the ratio instead.

With -hostile it runs, instead of faults, every attack of an anonymous
client and of a tenant with a token of its own at once (40 MB multipart
logins, oversize transactions and bursts of 60 KiB PUTs, unread catch-up
watches, held listings, withheld 4 MiB bodies, forged Eskv-Forwarded-By)
while a well-behaved tenant on the same partition writes and reads, and
checks its GET/PUT p99 (< 100 ms), its errors (none), every writer's peak
RSS (< 400 MiB) and readiness (always).

Every flag can also be set by the environment variable ESKV_CHAOS_<FLAG>
(-fault-every: ESKV_CHAOS_FAULT_EVERY); the command line wins.

`

// envAliases are variables other tools read too, each the default of a
// flag.
var envAliases = map[string]string{"seconds": "CHAOS_SECONDS", "partitions": "ESKV_PARTITIONS",
	"admin-postgres-url": "ESKV_TEST_POSTGRES_URL", "clickhouse-addr": "ESKV_TEST_CLICKHOUSE_ADDR"}

func parse(args []string, stderr io.Writer) (config, error) {
	c := config{faultEvery: span{2 * time.Second, 5 * time.Second}, writerPause: span{14 * time.Second, 17 * time.Second},
		projPause: span{2 * time.Second, 13 * time.Second}, restartIn: span{500 * time.Millisecond, 3 * time.Second},
		netCut: span{time.Second, 14 * time.Second}, depStall: span{time.Second, 6 * time.Second}}
	fs := flag.NewFlagSet("eskvchaos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	seconds, seed, faults := c.flags(fs)
	if err := cli.Parse(fs, args, "ESKV_CHAOS", envAliases); err != nil {
		return c, err
	}
	s, err := strconv.ParseFloat(*seconds, 64)
	if err != nil || s <= 0 {
		return c, fmt.Errorf("-seconds (CHAOS_SECONDS) must be a positive number, got %q", *seconds)
	}
	c.duration = time.Duration(s * float64(time.Second))
	if *seed == "" {
		c.seed = uint64(time.Now().UnixNano())
	} else if c.seed, err = strconv.ParseUint(*seed, 10, 64); err != nil {
		return c, fmt.Errorf("-seed must be an unsigned integer, got %q", *seed)
	}
	if c.hostile || c.throughput {
		c.netFaults, c.auditor = false, false // their figures are of the services, not of the network
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "faults" })
	if c.faults, err = parseFaults(*faults, c.killBroker, c.netFaults, c.auditor, explicit); err != nil {
		return c, err
	}
	return c, c.validate()
}

// flags defines the flags in fs and returns -seconds, -seed and -faults.
func (c *config) flags(fs *flag.FlagSet) (seconds, seed, faults *string) {
	seconds = fs.String("seconds", "120", "length of the fault phase in seconds (also CHAOS_SECONDS)")
	seed = fs.String("seed", "", "random seed of clients and faults; empty: from the clock (printed, to replay a schedule)")
	fs.IntVar(&c.clients, "clients", 12, "concurrent CAS clients")
	fs.IntVar(&c.listClients, "list-clients", 4, "concurrent list clients: lpush, rpush, lpop, rpop and ltrim 0 9 on two lists, checked against the fold of the log and the projection (0: none)")
	fs.IntVar(&c.queueClients, "queue-clients", 4, "concurrent queue clients: push unique items, pop with a 2s visibility timeout and ack (a quarter not: they come back), "+
		"pop without one, then drain two queues; checked against the log (each delivery, ack and requeue) and the projection (0: none)")
	fs.IntVar(&c.lockClients, "lock-clients", 3, "concurrent lock clients: acquire two fenced locks with a 2s lease, write the resource each protects in a transaction that checks the token "+
		"(now and then after stalling past the lease), release or let it lapse; checked from the log: tokens only grow, every resource write carries its tenure's token within the lease (0: none)")
	fs.IntVar(&c.sessionClients, "session-clients", 3, "concurrent session clients: create sessions with a 2s TTL, attach keys and one of two shared locks, keep alive and revoke, or stop heartbeating (the sweeper ends them); "+
		"checked from the log: no lock held by two live sessions, no key of an ended session live after its end, each attachment ended once (0: none)")
	fs.IntVar(&c.setClients, "set-clients", 4, "concurrent set clients: sadd, srem and sismember on two sets, checked against the fold of the log and the projection (0: none)")
	fs.IntVar(&c.watchClients, "watch-clients", 3, "watchers following the projects of the register keys with client.Watch through random writers, "+
		"checked against the log: its records of their prefixes, in order, no gap, no duplicate (0: none)")
	fs.IntVar(&c.informers, "informer-clients", 3, "informers keeping a cache of a project's prefix (list at a position, then watch after it; list again or resume at random, "+
		"through random writers), checked: no version of a key skipped or seen twice, each cache equal to the projection at the end (0: none)")
	fs.IntVar(&c.historyEvery, "history-every", 10, "one CAS-client step in N reads a register key's history instead, "+
		"checked to hold every write acknowledged before it, contiguous and in order (0: none)")
	fs.IntVar(&c.txnClients, "txn-clients", 4, "concurrent transfer clients: transactions of two conditioned puts between accounts that must keep summing to 0, and now and then a range delete of them all (0: none)")
	fs.IntVar(&c.keys, "keys", 5, "keys the clients share, each in its own project and partition when possible")
	fs.IntVar(&c.writers, "writers", 3, "writer processes")
	fs.IntVar(&c.projectors, "projectors", 2, "projector processes")
	fs.IntVar(&c.partitions, "partitions", 12, "partition count of kv.changes (also ESKV_PARTITIONS)")
	fs.DurationVar(&c.opTimeout, "op-timeout", 2*time.Second, "client timeout of one operation; a write that times out has an unknown outcome")
	fs.Var(&c.faultEvery, "fault-every", "time between two faults, min-max")
	fs.Var(&c.writerPause, "writer-pause", "how long a writer stays stopped (SIGSTOP); longer than the writers' 10s session timeout, "+
		"so its partitions move and it resumes as a zombie")
	fs.Var(&c.projPause, "projector-pause", "how long a projector stays stopped")
	fs.Var(&c.restartIn, "restart-after", "delay before a killed process is started again")
	faults = fs.String("faults", strings.Join(slices.Concat(faultKinds, netFaultKinds), ","), "fault kinds to inject, comma-separated; empty or none: no faults (the cut- kinds need -net-faults; without it the default leaves them out)")
	fs.BoolVar(&c.netFaults, "net-faults", true, "run the broker, every writer and projector in a network namespace of its own (needs root and iproute2) and inject the cut- faults; "+
		"-net-faults=false runs them on 127.0.0.1 without those faults")
	fs.Var(&c.netCut, "net-cut", "how long a network cut lasts")
	fs.BoolVar(&c.auditor, "auditor", true, "run an auditor into a fresh ClickHouse database and check its trail with auditor verify at the end (cut-auditor-clickhouse needs it)")
	fs.StringVar(&c.clickhouseAddr, "clickhouse-addr", "127.0.0.1:19000", "ClickHouse native-protocol address of -auditor, user default, with the right to create databases (also ESKV_TEST_CLICKHOUSE_ADDR; bash scripts/ensure-clickhouse.sh starts one)")
	fs.Var(&c.depStall, "dependency-stall", "how long a broker pause or a Postgres stall lasts")
	fs.BoolVar(&c.killBroker, "kill-broker", false, "also SIGKILL and restart the broker; off by default because kfake loses transaction state in a crash (see above)")
	fs.BoolVar(&c.throughput, "throughput", false, "measure write throughput with all writers against one writer instead of injecting faults")
	fs.DurationVar(&c.throughputDuration, "throughput-duration", 15*time.Second, "length of each throughput measurement")
	fs.IntVar(&c.throughputClients, "throughput-clients", 48, "concurrent writing clients of the throughput measurement")
	fs.BoolVar(&c.hostile, "hostile", false, "run the hostile-load phase instead of faults (attacks by an anonymous client and a tenant while another tenant's latency, errors and the writers' memory are checked)")
	fs.DurationVar(&c.hostileDuration, "hostile-duration", 20*time.Second, "length of the hostile-load phase")
	fs.Func("hostile-attacks", "the attacks of -hostile, comma-separated, of "+strings.Join(hostileAttackKinds, ", ")+" (default all)", func(v string) error {
		for _, a := range strings.Split(v, ",") {
			if !slices.Contains(hostileAttackKinds, a) {
				return fmt.Errorf("unknown attack %q", a)
			}
			c.hostileAttacks = append(c.hostileAttacks, a)
		}
		return nil
	})
	fs.StringVar(&c.adminPostgresURL, "admin-postgres-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"Postgres URL with the right to create and drop the run's database (also ESKV_TEST_POSTGRES_URL)")
	fs.DurationVar(&c.checkTimeout, "check-timeout", 5*time.Minute, "give up the linearizability check after this long (the verdict is then unknown, a failure)")
	fs.StringVar(&c.logLevel, "log-level", "warn", "log level of the services (at info a writer logs every write)")
	fs.BoolVar(&c.keep, "keep", false, "keep the run directory and database also when every check passes")
	return seconds, seed, faults
}

// parseFaults reads -faults; -kill-broker adds kill-broker.
func parseFaults(list string, killBroker, netFaults, auditor, explicit bool) ([]string, error) {
	known := slices.Concat([]string{faultKillBroker}, faultKinds, netFaultKinds)
	var out []string
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "" || f == "none":
		case !slices.Contains(known, f):
			return nil, fmt.Errorf("-faults: unknown fault %q (known: %s)", f, strings.Join(known, ", "))
		case !netFaults && slices.Contains(netFaultKinds, f) && explicit:
			return nil, fmt.Errorf("-faults: %s needs -net-faults (network namespaces)", f)
		case !netFaults && slices.Contains(netFaultKinds, f):
		case !auditor && f == faultCutAuditorClickHouse && explicit:
			return nil, fmt.Errorf("-faults: %s needs -auditor", f)
		case !auditor && f == faultCutAuditorClickHouse:
		default:
			out = append(out, f)
		}
	}
	if killBroker {
		out = append(out, faultKillBroker)
	}
	return out, nil
}

// validate checks the combination of flags.
func (c *config) validate() error {
	switch {
	case c.faultEvery.max <= 0:
		return errors.New("-fault-every must be positive")
	case c.clients < 1 || c.keys < 1 || c.partitions < 1:
		return errors.New("-clients, -keys and -partitions must be positive")
	case c.txnClients < 0:
		return errors.New("-txn-clients must not be negative")
	case c.setClients < 0:
		return errors.New("-set-clients must not be negative")
	case c.listClients < 0:
		return errors.New("-list-clients must not be negative")
	case c.lockClients < 0:
		return errors.New("-lock-clients must not be negative")
	case c.sessionClients < 0:
		return errors.New("-session-clients must not be negative")
	case c.queueClients < 0:
		return errors.New("-queue-clients must not be negative")
	case c.watchClients < 0 || c.historyEvery < 0 || c.informers < 0:
		return errors.New("-watch-clients, -informer-clients and -history-every must not be negative")
	case c.writers < 1 || c.projectors < 1:
		return errors.New("-writers and -projectors must be at least 1")
	case c.opTimeout <= 0 || c.checkTimeout <= 0:
		return errors.New("-op-timeout and -check-timeout must be positive")
	case c.throughput && (c.writers < 2 || c.throughputDuration <= 0 || c.throughputClients < 1):
		return errors.New("-throughput needs at least 2 writers, a positive -throughput-duration and -throughput-clients")
	}
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	if spec := os.Getenv(attackerEnv); spec != "" {
		return runAttacker(spec, stdout)
	}
	c, err := parse(args, stderr)
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
	switch {
	case c.hostile:
		err = runHostile(ctx, c, s, stdout)
	case c.throughput:
		err = runThroughput(ctx, c, s, stdout, stderr)
	default:
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
