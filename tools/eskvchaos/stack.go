package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/tools/internal/localstack"
)

// stack is the system under test, as processes the harness started.
type stack struct {
	*localstack.Stack
	store *projection.Store
	token string
	peer  string // the writers' ESKV_PEER_SECRET
	// goodToken and evilToken are the tenants' tokens of -hostile
	// (tenant/good/ and tenant/evil/), in the writers' tokens file.
	goodToken, evilToken string
	topics               changelog.Topics
	writers              []*proc.Proc
	projectors           []*proc.Proc
	auditor              *proc.Proc // with -auditor
	auditEnv             []string   // the auditor's environment, ClickHouse reached directly (auditor verify)
	clickhouseAddr, chDB string     // -auditor's ClickHouse and the run's database there
	env                  []string   // every service's (Env)
	// net is the network of -net-faults (nil without): each service's
	// namespace by its process, a twin writer sharing its target's.
	net   *netlab
	nodes map[*proc.Proc]*netnode

	t0       time.Time // the harness's clock starts here
	progress io.Writer
	pmu      sync.Mutex
	hlog     *os.File // progress lines, also kept in the run directory

	closing chan struct{}
	sup     sync.WaitGroup // restarts after unexpected exits
	umu     sync.Mutex
	exits   []string // unexpected exits, described
}

// logf prints a progress line with the harness's clock.
func (s *stack) logf(format string, args ...any) {
	s.pmu.Lock()
	defer s.pmu.Unlock()
	line := fmt.Sprintf("eskvchaos: %6.1fs %s\n", time.Since(s.t0).Seconds(), fmt.Sprintf(format, args...))
	io.WriteString(s.progress, line)
	if s.hlog != nil {
		s.hlog.WriteString(line)
	}
}

// startStack builds the services, creates a database and the topics,
// starts broker, projectors and writers on free ports and waits until every
// partition is owned by a ready writer. On error everything started is
// stopped again.
func startStack(ctx context.Context, c config, progress io.Writer) (_ *stack, err error) {
	cmds := []string{"writer", "projector"}
	if c.auditor {
		cmds = append(cmds, "auditor")
	}
	ls, err := localstack.New(ctx, localstack.Config{Tool: "eskvchaos", AdminURL: c.adminPostgresURL,
		Cmds: cmds, Progress: progress, BrokerLogLevel: "warn", PprofBase: os.Getenv("ESKV_PPROF_ADDR")})
	if err != nil {
		return nil, err
	}
	s := &stack{Stack: ls, store: projection.New(ls.DB), progress: progress, t0: time.Now(), closing: make(chan struct{}), nodes: map[*proc.Proc]*netnode{},
		token: "chaos-" + localstack.RandomHex(16), peer: localstack.RandomHex(32),
		topics: changelog.Topics{Changes: changelog.DefaultChangesTopic, Conflicts: changelog.DefaultConflictsTopic,
			Partitions: int32(c.partitions)}}
	defer func() {
		if err != nil {
			s.printLogTails(progress)
			s.close(false)
		}
	}()
	if s.hlog, err = os.Create(filepath.Join(s.Dir, "harness.log")); err != nil {
		return nil, err
	}
	if c.netFaults {
		if err := s.makeNet(); err != nil {
			return nil, err
		}
	}
	if err := s.addServices(c); err != nil {
		return nil, err
	}
	s.logf("starting devbroker on %s, %d projectors, %d writers (logs in %s)", s.Brokers, c.projectors, c.writers, s.Dir)
	if err := s.StartBroker(ctx); err != nil {
		return nil, err
	}
	if err := s.ensureTopics(ctx); err != nil {
		return nil, err
	}
	for _, p := range s.Services {
		if err := p.Start(); err != nil {
			return nil, err
		}
	}
	if err := s.waitReady(ctx, 120*time.Second, true); err != nil {
		return nil, err
	}
	s.logf("stack ready: every partition owned by a ready writer")
	return s, nil
}

// addServices adds the projectors and writers, on free ports; a process
// that exits on its own is recorded and started again.
func (s *stack) addServices(c config) error {
	ports, err := proc.FreePorts(c.writers + c.projectors)
	if err != nil {
		return err
	}
	env := s.Env(c.logLevel, c.partitions)
	if c.hostile {
		s.goodToken, s.evilToken = "good-"+localstack.RandomHex(16), "evil-"+localstack.RandomHex(16)
		tokens, err := hostileTokens(s.Dir, s.goodToken, s.evilToken)
		if err != nil {
			return err
		}
		env = append(env, tokens)
	}
	s.env = env
	// add adds the service name, in a namespace of its own under
	// -net-faults; env makes its environment from its host.
	add := func(name, bin string, args []string, port int, env func(host string) []string) (*proc.Proc, error) {
		host, node := "127.0.0.1", (*netnode)(nil)
		if s.net != nil {
			var err error
			if node, err = s.net.add(name); err != nil {
				return nil, err
			}
			host = node.ip
		}
		p := s.Service(name, bin, args, env(host)...)
		p.URL = fmt.Sprintf("http://%s:%d", host, port)
		p.OnExit = func(err error) { s.unexpectedExit(p, err) }
		if node != nil {
			p.NetNS = node.ns
			s.nodes[p] = node
		}
		return p, nil
	}
	for i := range c.projectors {
		port := ports[c.writers+i]
		// Every other projector writes kv_history's rows as text, the
		// others as jsonb (ESKV_HISTORY_FORMAT): the history, the
		// writers' requestId lookups and the projection diff read both
		// formats, mixed on a key as the projectors take over from each
		// other.
		format := [...]string{"jsonb", "text"}[i%2]
		p, err := add(fmt.Sprintf("projector-%d", i+1), "projector", nil, port, func(host string) []string {
			return append(slices.Clone(env), fmt.Sprintf("ESKV_PROJECTOR_ADDR=%s:%d", host, port),
				fmt.Sprintf("ESKV_PROJECTOR_ID=chaos-p%d", i+1), "ESKV_HISTORY_FORMAT="+format)
		})
		if err != nil {
			return err
		}
		s.projectors = append(s.projectors, p)
	}
	for i := range c.writers {
		p, err := add(fmt.Sprintf("writer-%d", i+1), "writer", nil, ports[i], func(host string) []string {
			return s.writerEnv(host, ports[i], fmt.Sprintf("chaos-w%d", i+1))
		})
		if err != nil {
			return err
		}
		s.writers = append(s.writers, p)
	}
	if !c.auditor {
		return nil
	}
	ports, err = proc.FreePorts(1)
	if err != nil {
		return err
	}
	s.clickhouseAddr, s.chDB = c.clickhouseAddr, s.DBName // the auditor creates it
	chAddr := c.clickhouseAddr
	if s.net != nil {
		if chAddr, err = s.net.forward(hostClickHouse, c.clickhouseAddr); err != nil {
			return err
		}
	}
	auditEnv := func(ch string) []string {
		return []string{"ESKV_BROKERS=" + s.Brokers, fmt.Sprintf("ESKV_PARTITIONS=%d", c.partitions), "ESKV_CLICKHOUSE_ADDR=" + ch,
			"ESKV_CLICKHOUSE_DATABASE=" + s.chDB, "ESKV_AUDIT_KEY=" + s.peer, "ESKV_AUDIT_KEY_ID=chaos", "ESKV_LOG_LEVEL=" + c.logLevel}
	}
	s.auditEnv = auditEnv(c.clickhouseAddr)
	s.auditor, err = add("auditor", "auditor", []string{"serve"}, ports[0], func(host string) []string {
		return append(auditEnv(chAddr), fmt.Sprintf("ESKV_AUDITOR_ADDR=%s:%d", host, ports[0]), "ESKV_AUDITOR_ID=chaos-a1",
			"ESKV_ALERT_WINDOW=0")
	})
	return err
}

// writerEnv is the environment of a writer listening on host:port with
// the static instance id id.
func (s *stack) writerEnv(host string, port int, id string) []string {
	return append(slices.Clone(s.env), fmt.Sprintf("ESKV_HTTP_ADDR=%s:%d", host, port), "ESKV_DEV_TOKEN="+s.token,
		"ESKV_PEER_SECRET="+s.peer, "ESKV_WRITER_ID="+id)
}

// makeNet makes the network of -net-faults: the bridge, the broker's
// namespace and address, and the Postgres forwarder the services use.
func (s *stack) makeNet() error {
	// Not from -seed: two runs replaying one seed side by side must not
	// share names or addresses.
	l, err := newNetlab(rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())))
	if err != nil {
		return err
	}
	s.net = l
	b, err := l.add("broker")
	if err != nil {
		return err
	}
	_, port, _ := strings.Cut(s.Brokers, ":")
	s.Brokers, s.BrokerNetNS = b.ip+":"+port, b.ns
	u, err := url.Parse(s.DBURL)
	if err != nil {
		return err
	}
	if u.Host, err = l.forward(hostDB, u.Host); err != nil {
		return err
	}
	s.ServiceDBURL = u.String()
	s.logf("network namespaces on %s0/24 (bridge %s): clients %s, Postgres %s, broker %s", l.prefix, l.bridge, l.clientsIP(), u.Host, s.Brokers)
	return nil
}

// ensureTopics creates kv.changes and kv.conflicts before any service
// starts, so writers do not race to create them.
func (s *stack) ensureTopics(ctx context.Context) error {
	cl, err := kafkaconf.Conn{}.NewClient("chaos", []string{s.Brokers}) // the tool's own plaintext local stack
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return changelog.Ensure(ctx, kadm.NewClient(cl), s.topics)
}

// waitReady waits until every partition has an owner row naming a writer
// that is running and answers /readyz with 200, and every projector
// answers /readyz; with allWriters, every writer must be ready too (own
// partitions).
func (s *stack) waitReady(ctx context.Context, timeout time.Duration, allWriters bool) error {
	var why string
	err := proc.WaitFor(ctx, timeout, "every partition owned by a ready writer", nil, func() bool {
		why = s.notReady(ctx, allWriters)
		return why == ""
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, why)
	}
	return nil
}

// notReady says what is not ready yet, or "".
func (s *stack) notReady(ctx context.Context, allWriters bool) string {
	ready := map[string]bool{}
	for _, w := range s.writers {
		ready[w.URL] = w.Running() && proc.HTTPOK(w.URL+"/readyz")
		if allWriters && !ready[w.URL] {
			return w.Name + " is not ready"
		}
	}
	for _, p := range s.projectors {
		if !p.Running() || !proc.HTTPOK(p.URL+"/readyz") {
			return p.Name + " is not ready"
		}
	}
	owners, err := s.store.Owners(ctx)
	if err != nil {
		return err.Error()
	}
	for id := range s.topics.Partitions {
		if o, ok := owners[id]; !ok || !ready[o.Addr] {
			return fmt.Sprintf("partition %d has no ready owner (%+v)", id, o)
		}
	}
	return ""
}

// unexpectedExit records a process that exited on its own and starts it
// again after a second, unless the stack is closing.
func (s *stack) unexpectedExit(p *proc.Proc, err error) {
	select {
	case <-s.closing:
		return
	default:
	}
	s.umu.Lock()
	s.exits = append(s.exits, fmt.Sprintf("%s exited on its own at %.1fs: %v", p.Name, time.Since(s.t0).Seconds(), err))
	s.umu.Unlock()
	s.logf("%s exited on its own (%v); starting it again", p.Name, err)
	s.sup.Add(1)
	go func() {
		defer s.sup.Done()
		select {
		case <-s.closing:
		case <-time.After(time.Second):
			if err := p.Start(); err != nil {
				s.logf("restart %s: %v", p.Name, err)
			}
		}
	}()
}

func (s *stack) unexpectedExits() []string {
	s.umu.Lock()
	defer s.umu.Unlock()
	return append([]string(nil), s.exits...)
}

// close stops writers, projectors and the broker, drops the database and
// removes the run directory unless keep.
func (s *stack) close(keep bool) {
	select {
	case <-s.closing:
	default:
		close(s.closing)
	}
	s.Stop()
	s.sup.Wait()
	if s.net != nil {
		s.net.Close()
	}
	if s.chDB != "" && !keep {
		if err := dropClickHouse(s.clickhouseAddr, s.chDB); err != nil {
			s.logf("drop ClickHouse database %s: %v", s.chDB, err)
		}
	}
	s.pmu.Lock()
	if s.hlog != nil {
		s.hlog.Close()
		s.hlog = nil
	}
	s.pmu.Unlock()
	s.Close(keep)
}

// printLogTails prints the end of every service log, without the WARN
// line each CAS conflict logs (expected by the hundred under contention).
func (s *stack) printLogTails(w io.Writer) {
	s.LogTails(w, `"msg":"version conflict"`)
}
