// Command eskvbench is eskv's load generator (make bench). It measures
// CAS-write latency, concurrent write throughput, reads, lists, projector
// lag, peak memory, the auditor and filtered scans, and prints each figure
// next to its target.
//
// By default it builds and starts its own stack as real processes (dev
// broker, projector and writer on free ports, a fresh Postgres database)
// so that figures are reproducible, and stops it at the end. With -url and
// -token it targets a running stack instead.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/tools/internal/cli"
	"github.com/eskv/eskv/tools/internal/pgcluster"
	"github.com/jackc/pgx/v5/pgxpool"
)

func main() { service.Main("eskvbench", run) }

// config is the bench's configuration; every field is a flag whose default
// comes from an ESKV_ environment variable.
type config struct {
	url          string
	token        string
	projectorURL string
	auditorURL   string
	postgresURL  string
	writerPID    int
	projectorPID int

	adminPostgresURL string
	postgres         string // own or shared
	partitions       int
	brokerDataParent string
	keep             bool

	n            int
	duration     time.Duration
	clients      int
	readClients  int
	readDuration time.Duration
	listKeys     int
	listN        int
	visEvery     int
	lagMetric    string
	json         bool
	cpuProfile   string
	scanEntries  int
	scanN        int
	manyN        int
	only         map[string]bool // figures to run; nil for all

	auditor        bool
	clickhouseAddr string

	robustConns                         int
	robustRead, robustWrite, robustIdle time.Duration

	peers        []string // figure 18's peers, in order
	peerDuration time.Duration
	peerWarmup   time.Duration
	peerSettle   time.Duration
	peerClients  int

	sustain       time.Duration // figure 22's length
	sustainWindow time.Duration // and its windows

	scale          bool // figure 23 alone
	scaleKeys      int  // keys of figure 23's one project; 10 × over scaleProjects
	scaleProjects  int
	scaleTouch     int // requests of figure 23d
	scaleTakeovers int // kills of figure 23e
}

const usage = `usage: eskvbench [flags]

Without -url, builds and starts devbroker, projector, writer and (when
ClickHouse answers) the auditor on free ports with a fresh Postgres database
and ClickHouse database (ESKV_PARTITIONS=12, ESKV_LOG_LEVEL=info), measures,
and stops them. With -url and -token, targets a running stack.

Figures: 1 CAS write; 2 concurrent writes, with 5 projector lag and
visibility and 7a auditor lag; 3 GETs; 4 a list, 4b the same right after a
write under its prefix; 6 peak memory and CPU;
7b auditor ingest; 8 filtered scans (field/op/value) over -scan-entries
entries loaded straight into the projection (own stack only); 9 lock
acquire/release; 10 the TTL sweeper expiring 10,000 entries; 11 a normal
client's PUT/GET p99 and the writer's memory while -robust-conns
connections of each hostile kind (unsent bodies, idle keep-alives, slow
readers of large listings) are open, and whether the writer closes them
within its timeouts (the own stack's writer runs with
ESKV_HTTP_READ_TIMEOUT=5s, ESKV_HTTP_WRITE_TIMEOUT=10s,
ESKV_HTTP_IDLE_TIMEOUT=15s); 12 transactions of 10 conditioned puts, from
one client (latency) and from 16 clients (throughput); 13 sismember on
a set of 1,000 and of 1,000,000 members loaded straight into the
projection (own stack only); 14 lrange 0 99 on a list of 1,000 and of
1,000,000 values loaded the same way; 15 queue push and pop from one
client, pops/s of 16 consumers of one queue (pop + ack with a visibility
timeout, and plain pops), and a pop on a queue of 1,000 and of 1,000,000
items loaded the same way; 16 watch delivery (a write acknowledged → its
event received by a watcher) at 1,000 writes/s; 17 figure 2a's writes
with 0 and with 200 idle watchers open; 18 read-then-CAS side by side on
eskv and its peers (a plain Postgres table, etcd, NATS JetStream KV,
Redis; each started by the bench on free ports, scripts/ensure-peers.sh
installs them), with eskv's CPU per acknowledged write; eskv's first
scenario runs again after the peers, to show how much the machine's
speed moved meanwhile; 19 a keys-only listing of 10,000 keys
(keysOnly=true, pages of 1,000 followed by nextCursor) whole and per
page, and the full listing of the same keys, with the bytes answered; 20
a batch get of 1,000 keys of 1 project and of 4 projects; 21 a listing
of 1,000 keys at= the position of a listing taken before one more write
to each (unavailable where the writer refuses at); 22 figure 18a's
workload on eskv alone for -sustain (10 min), ok/s per -sustain-window
(1 min) with the CPU per write, the writer's memory and the projection's
tables, and the last window over the first. -only runs
some of them: eskvbench -only 8, or make bench BENCH_ARGS='-only 9,10'.

-scale runs figure 23 alone, flat as data grows (own stack only, without
the auditor; 10-15 minutes at -scale-keys 200000 -scale-projects 20 on
2 shared CPUs, about an hour and 55 GB of disk under Postgres at the defaults,
checked before it starts;
docs/performance.md): 10,000 keys in one
project, then -scale-keys in one project, then 10 × -scale-keys over
-scale-projects projects, each loaded through kv.changes (put events
produced as a writer would, folded by the stack's projector); at each
size 23a GET p99, 23b a listing of 1,000 keys, 23c figure 8b's filtered
scan, each against the 10,000 keys' (≤ 2×); 23d the writer's memory
after -scale-touch requests over the large project; 23e partition
takeover (a second writer SIGKILLed -scale-takeovers times; p99 ≤ 5s);
23f projector rebuild -into a fresh schema (≥ 50,000 keys/s); 23g bytes
per key in Postgres and in the topic; 23h the run's duration.

Every flag can also be set by the environment variable ESKV_BENCH_<FLAG>
(-read-clients: ESKV_BENCH_READ_CLIENTS); the command line wins.

`

// envAliases are variables other tools read too, each the default of a
// flag.
var envAliases = map[string]string{"clickhouse-addr": "ESKV_TEST_CLICKHOUSE_ADDR",
	"admin-postgres-url": "ESKV_TEST_POSTGRES_URL", "partitions": "ESKV_PARTITIONS"}

func parse(args []string, stderr io.Writer) (c config, err error) {
	fs := flag.NewFlagSet("eskvbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	only := c.flags(fs)
	peers := fs.String("peers", strings.Join(peerNames, ","), "figure 18's peers, comma-separated among "+strings.Join(peerNames, ",")+"; none for eskv alone")
	if err := cli.Parse(fs, args, "ESKV_BENCH", envAliases); err != nil {
		return c, err
	}
	if c.peers, err = parsePeers(*peers); err != nil {
		return c, err
	}
	if *only != "" {
		c.only = map[string]bool{}
		for _, f := range strings.Split(*only, ",") {
			f = strings.TrimSpace(f)
			if !slices.Contains(benchFigures, f) {
				return c, fmt.Errorf("-only: figure %q is not one of %s", f, strings.Join(benchFigures, ","))
			}
			c.only[f] = true
		}
	}
	c.url = strings.TrimRight(c.url, "/")
	c.projectorURL = strings.TrimRight(c.projectorURL, "/")
	c.auditorURL = strings.TrimRight(c.auditorURL, "/")
	if err := c.validate(); err != nil {
		return c, err
	}
	if c.scale {
		// Figure 23 alone, without the auditor (it would have millions
		// of events to chain).
		c.only, c.auditor = map[string]bool{}, false
	}
	return c, nil
}

// flags defines the flags in fs and returns -only.
func (c *config) flags(fs *flag.FlagSet) *string {
	fs.StringVar(&c.url, "url", "", "target this running writer instead of starting a stack")
	fs.StringVar(&c.token, "token", "", "bearer token for -url, with read and write rights on tenant bench")
	fs.StringVar(&c.projectorURL, "projector-url", "", "with -url: the projector's base URL, for its lag histogram")
	fs.StringVar(&c.auditorURL, "auditor-url", "", "with -url: the auditor's base URL, for its lag histogram")
	fs.BoolVar(&c.auditor, "auditor", true, "start the auditor with the stack (ClickHouse needed) and measure its lag and ingest rate")
	fs.StringVar(&c.clickhouseAddr, "clickhouse-addr", "127.0.0.1:19000",
		"ClickHouse native address for the auditor of the bench's stack (also ESKV_TEST_CLICKHOUSE_ADDR)")
	fs.StringVar(&c.postgresURL, "postgres-url", "", "with -url: the projection database, for end-to-end visibility")
	fs.IntVar(&c.writerPID, "writer-pid", 0, "with -url: the writer's pid, for its peak memory and CPU")
	fs.IntVar(&c.projectorPID, "projector-pid", 0, "with -url: the projector's pid, for its peak memory and CPU")
	fs.StringVar(&c.adminPostgresURL, "admin-postgres-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable",
		"Postgres URL with the right to create the bench's database (also ESKV_TEST_POSTGRES_URL)")
	fs.StringVar(&c.postgres, "postgres", "own",
		"own: start a Postgres cluster of the bench's own, configured as production runs it (autovacuum on, pg_stat_statements; tools/internal/pgcluster), for the stack and figure 18's Postgres table; shared: create the databases in -admin-postgres-url's cluster")
	fs.IntVar(&c.partitions, "partitions", 12, "partition count of kv.changes, to spread clients over partitions (also ESKV_PARTITIONS)")
	fs.StringVar(&c.brokerDataParent, "broker-data", "",
		"directory to create the broker's data directory in (default the bench's temporary directory; /dev/shm takes fsync cost out)")
	fs.BoolVar(&c.keep, "keep", false, "keep the started stack's logs, broker data and database")
	fs.IntVar(&c.n, "n", 2000, "operations of the single-client CAS and GET runs")
	fs.DurationVar(&c.duration, "duration", 10*time.Second, "length of each concurrent write run")
	fs.IntVar(&c.clients, "clients", 64, "concurrent writers")
	fs.IntVar(&c.readClients, "read-clients", 16, "concurrent readers")
	fs.DurationVar(&c.readDuration, "read-duration", 3*time.Second, "length of the concurrent GET run")
	fs.IntVar(&c.listKeys, "list-keys", 1000, "keys seeded under one prefix and listed (at most 1000)")
	fs.IntVar(&c.listN, "list-n", 200, "list requests timed")
	fs.IntVar(&c.visEvery, "visibility-every", 20, "check end-to-end visibility of every Nth concurrent write")
	fs.StringVar(&c.lagMetric, "lag-metric", "eskv_projector_lag_seconds", "the projector's lag histogram; when absent, the first histogram named *lag*")
	fs.BoolVar(&c.json, "json", false, "print the results as JSON")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write the bench's own CPU profile to this file")
	fs.IntVar(&c.scanEntries, "scan-entries", 100000, "entries loaded under one prefix for the filtered scans of figure 8")
	fs.IntVar(&c.scanN, "scan-n", 200, "filtered scans timed per case of figure 8")
	fs.IntVar(&c.manyN, "many-n", 50, "listings of figures 19 and 21 and batch gets of figure 20 timed per step")
	fs.IntVar(&c.robustConns, "robust-conns", 500, "hostile connections of each kind opened in figure 11")
	fs.DurationVar(&c.robustRead, "robust-read-timeout", benchReadTimeout, "the writer's read timeout (figure 11; the own stack's writer is started with it)")
	fs.DurationVar(&c.robustWrite, "robust-write-timeout", benchWriteTimeout, "the writer's write timeout (figure 11; the own stack's writer is started with it)")
	fs.DurationVar(&c.robustIdle, "robust-idle-timeout", benchIdleTimeout, "the writer's idle timeout (figure 11; the own stack's writer is started with it)")
	fs.DurationVar(&c.peerDuration, "peer-duration", 8*time.Second, "length of each run of figure 18 (per system and scenario)")
	fs.DurationVar(&c.peerWarmup, "peer-warmup", 2*time.Second, "unmeasured run of figure 18's first scenario on each system before it is measured (0: none)")
	fs.DurationVar(&c.peerSettle, "peer-settle", 30*time.Second, "before each system of figure 18, wait at most this long for the machine to be quiet (under 10% busy over 0.5 s; 0: do not wait)")
	fs.IntVar(&c.peerClients, "peer-clients", 64, "clients of figure 18's first scenario (distinct keys over 8 projects)")
	fs.DurationVar(&c.sustain, "sustain", 10*time.Minute, "length of figure 22 (figure 18a's workload on eskv alone, printed per window)")
	fs.DurationVar(&c.sustainWindow, "sustain-window", time.Minute, "figure 22's windows")
	fs.BoolVar(&c.scale, "scale", false, "run figure 23 alone: flat as data grows (long: see above)")
	fs.IntVar(&c.scaleKeys, "scale-keys", 1_000_000, "figure 23: keys of the one large project; 10 times as many are spread over -scale-projects")
	fs.IntVar(&c.scaleProjects, "scale-projects", 100, "figure 23: projects the 10 × -scale-keys keys are spread over")
	fs.IntVar(&c.scaleTouch, "scale-touch", 200_000, "figure 23d: requests over the large project's keys before the writer's memory is read")
	fs.IntVar(&c.scaleTakeovers, "scale-takeovers", 10, "figure 23e: times a writer is killed")
	return fs.String("only", "", "run only these figures, comma-separated among 1,2,3,4,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22 (5 comes with 2, 6 always); "+
		"e.g. -only 8 for the filtered scans (make bench BENCH_ARGS='-only 8')")
}

// validate checks the combination of flags.
func (c *config) validate() error {
	switch {
	case c.url != "" && c.token == "":
		return errors.New("-url needs -token")
	case c.url != "" && c.brokerDataParent != "":
		return errors.New("-broker-data is for the stack the bench starts, not with -url")
	case c.url == "" && (c.projectorURL != "" || c.auditorURL != "" || c.postgresURL != "" || c.writerPID != 0 || c.projectorPID != 0):
		return errors.New("-projector-url, -auditor-url, -postgres-url and the pids go with -url")
	case c.n < 1 || c.clients < 1 || c.readClients < 1 || c.listN < 1 || c.visEvery < 1 || c.partitions < 1 || c.scanEntries < 1 || c.scanN < 1 || c.robustConns < 1 || c.manyN < 1:
		return errors.New("-n, -clients, -read-clients, -list-n, -visibility-every, -partitions, -scan-entries, -scan-n, -robust-conns and -many-n must be positive")
	case c.robustRead <= 0 || c.robustWrite <= 0 || c.robustIdle <= 0:
		return errors.New("-robust-read-timeout, -robust-write-timeout and -robust-idle-timeout must be positive")
	case c.listKeys < 1 || c.listKeys > 1000:
		return errors.New("-list-keys must be between 1 and 1000 (the API's list limit)")
	case c.duration <= 0 || c.readDuration <= 0 || c.peerDuration <= 0:
		return errors.New("-duration, -read-duration and -peer-duration must be positive")
	case c.peerWarmup < 0 || c.peerSettle < 0:
		return errors.New("-peer-warmup and -peer-settle must not be negative")
	case c.sustain <= 0 || c.sustainWindow <= 0 || c.sustainWindow > c.sustain:
		return errors.New("-sustain and -sustain-window must be positive, the window at most -sustain")
	case c.peerClients < 1:
		return errors.New("-peer-clients must be positive")
	case c.scale && c.url != "":
		return errors.New("-scale needs the bench's own stack, not -url")
	case c.scale && c.only != nil:
		return errors.New("-scale runs figure 23 alone: leave out -only")
	case c.scaleKeys < scaleBaseKeys || c.scaleProjects < 1 || c.scaleTouch < 1 || c.scaleTakeovers < 1:
		return fmt.Errorf("-scale-keys must be at least %d, -scale-projects, -scale-touch and -scale-takeovers positive", scaleBaseKeys)
	case scaleManyFactor*c.scaleKeys/c.scaleProjects < scaleListPage:
		return fmt.Errorf("-scale-projects: 10 × -scale-keys over %d projects leaves fewer than %d keys per project", c.scaleProjects, scaleListPage)
	case c.postgres != "own" && c.postgres != "shared":
		return fmt.Errorf("-postgres %q: want own or shared", c.postgres)
	}
	return nil
}

// parsePeers reads -peers: names among peerNames, or none.
func parsePeers(s string) ([]string, error) {
	var peers []string
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		switch {
		case p == "" || p == "none":
		case !slices.Contains(peerNames, p):
			return nil, fmt.Errorf("-peers: %q is not one of %s", p, strings.Join(peerNames, ","))
		case !slices.Contains(peers, p):
			peers = append(peers, p)
		}
	}
	return peers, nil
}

// benchFigures are the figures -only selects.
var benchFigures = []string{"1", "2", "3", "4", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19", "20", "21", "22"}

// wants reports whether the run measures figure f.
func (c *config) wants(f string) bool { return c.only == nil || c.only[f] }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var s *stack
	if c.url == "" {
		if c.postgres == "own" {
			fmt.Fprintln(stderr, "eskvbench: starting a Postgres cluster of its own (-postgres own)")
			pg, err := pgcluster.Start(ctx, "eskvbench")
			if err != nil {
				return fmt.Errorf("%w (or run with -postgres shared)", err)
			}
			defer pg.Close()
			c.adminPostgresURL = pg.AdminURL
		}
		if s, err = startStack(ctx, c, stderr); err != nil {
			return err
		}
	} else {
		s = &stack{writerURL: c.url, projectorURL: c.projectorURL, auditorURL: c.auditorURL, token: c.token,
			writerPID: c.writerPID, projectorPID: c.projectorPID}
		if c.postgresURL != "" {
			if s.db, err = pgxpool.New(ctx, c.postgresURL); err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
		}
	}
	rep := &report{Mode: "own stack", Config: reportConfig(c), Host: host{CPUs: runtime.NumCPU(), LoadStart: loadAvg()}}
	if !s.own {
		rep.Mode = "target " + c.url
	}
	var procs []*proc.Proc
	if s.local != nil {
		procs = s.local.Procs()
	}
	for _, p := range procs {
		rep.Services = append(rep.Services, p.Name)
	}
	defer func() {
		// Peak memory and CPU are read before the services stop, the
		// logs after.
		rep.Processes = processes(s)
		rep.Host.LoadEnd = loadAvg()
		s.stop()
		for _, p := range procs {
			rep.Logs = append(rep.Logs, summarizeLog(p.Name, p.Log))
		}
		s.close(stderr, c.keep)
		if err == nil || errors.Is(err, context.Canceled) {
			rep.Interrupted = err != nil
			if perr := rep.print(stdout, c.json); perr != nil && err == nil {
				err = perr
			}
		}
	}()

	b := newBench(c, s, stderr)
	if err := b.run(ctx, rep); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		return err
	}
	return nil
}

func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        512,
			MaxIdleConnsPerHost: 256,
			// Below the writer's idle timeout (15s in the bench's stack),
			// so the client never reuses a connection the writer is
			// closing.
			IdleConnTimeout:    10 * time.Second,
			DisableCompression: true,
			ForceAttemptHTTP2:  false,
		},
	}
}
