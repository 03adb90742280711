// Package localstack is the stack eskvbench and eskvchaos both start: the
// services built from the eskv module into a run directory, a fresh
// Postgres database with the projection schema and the dev broker on a
// free port, as processes (internal/proc). Close stops the services, then
// the broker, drops the database and removes the directory.
package localstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/internal/proc"
	"github.com/eskv/eskv/projection"
)

// Config says what to start.
type Config struct {
	Tool     string    // eskvbench or eskvchaos: names the directory, the database and progress lines
	AdminURL string    // Postgres URL with the right to create and drop databases
	Cmds     []string  // services to build from the eskv module's cmd/, besides devbroker
	Progress io.Writer // progress and cleanup messages
	// BrokerData is the directory to create the broker's data directory
	// in; "" for the run directory.
	BrokerData     string
	BrokerLogLevel string
	PassEnv        []string // ESKV_ variables of this process the services get too
	// PprofBase, a host:port, gives each process the stack starts its own
	// ESKV_PPROF_ADDR: the broker the port, each next process the next
	// port (printed as it starts); "" for none.
	PprofBase string
}

// Stack is the run directory, the database and the processes.
type Stack struct {
	Config
	Dir     string // run directory: binaries, logs, broker data
	Bin     string
	DBName  string
	DBURL   string
	DB      *pgxpool.Pool
	Brokers string     // the broker's address
	Broker  *proc.Proc // started by StartBroker
	// BrokerNetNS, when set before StartBroker, is the network namespace
	// the broker runs in (Brokers then holds an address of it).
	BrokerNetNS string
	// ServiceDBURL, when set, is the Postgres URL the services get
	// (Env) instead of DBURL: the database through a forwarder.
	ServiceDBURL string
	Services     []*proc.Proc
	extra        []string // directories removed with Dir
	pprofs       int      // processes given a pprof address so far
}

// New builds the services and creates and migrates the database. On error
// what was made is removed again.
func New(ctx context.Context, c Config) (_ *Stack, err error) {
	s := &Stack{Config: c}
	defer func() {
		if err != nil {
			s.Close(false)
		}
	}()
	if s.Dir, err = os.MkdirTemp("", c.Tool+"-"); err != nil {
		return nil, err
	}
	s.Bin = filepath.Join(s.Dir, "bin")
	root, err := proc.ModuleDir(ctx, "github.com/eskv/eskv")
	if err != nil {
		return nil, fmt.Errorf("run %s from the tools module (make bench, make chaos, or cd tools && go run ./%s): %w", c.Tool, c.Tool, err)
	}
	s.logf("building devbroker, %s into %s", strings.Join(c.Cmds, ", "), s.Bin)
	pkgs := []string{"./cmd/devbroker"}
	for _, name := range c.Cmds {
		pkgs = append(pkgs, "./cmd/"+name)
	}
	if err := proc.Build(ctx, root, s.Bin, pkgs...); err != nil {
		return nil, err
	}
	if err := s.createDB(ctx); err != nil {
		return nil, err
	}
	if s.DB, err = pgxpool.New(ctx, s.DBURL); err != nil {
		return nil, fmt.Errorf("connect %s: %w", s.DBURL, err)
	}
	// Migrate here, so writers and projectors do not race to do it.
	if err := projection.Migrate(ctx, s.DB); err != nil {
		return nil, err
	}
	ports, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	s.Brokers = fmt.Sprintf("127.0.0.1:%d", ports[0])
	return s, nil
}

func (s *Stack) logf(format string, args ...any) {
	if s.Progress != nil {
		fmt.Fprintf(s.Progress, s.Tool+": "+format+"\n", args...)
	}
}

func (s *Stack) createDB(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, s.AdminURL)
	if err != nil {
		return fmt.Errorf("postgres at %s is unreachable (set ESKV_TEST_POSTGRES_URL or -admin-postgres-url): %w", s.AdminURL, err)
	}
	defer admin.Close(context.WithoutCancel(ctx))
	name := s.Tool + "_" + RandomHex(6)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	s.DBName = name
	s.DBURL, err = projection.WithDatabase(s.AdminURL, name)
	return err
}

// StartBroker starts the dev broker and waits until it listens.
func (s *Stack) StartBroker(ctx context.Context) (err error) {
	data := filepath.Join(s.Dir, "broker")
	if s.BrokerData != "" {
		if data, err = os.MkdirTemp(s.BrokerData, s.Tool+"-broker-"); err != nil {
			return err
		}
		s.extra = append(s.extra, data)
	}
	s.Broker = s.newProc("devbroker", "devbroker", nil, "ESKV_BROKER_PORT="+s.Brokers, "ESKV_BROKER_DATA="+data,
		"ESKV_BROKER_LOG_LEVEL="+s.BrokerLogLevel)
	s.Broker.NetNS = s.BrokerNetNS
	if err := s.Broker.Start(); err != nil {
		return err
	}
	return proc.WaitFor(ctx, 30*time.Second, "devbroker to listen on "+s.Brokers, s.Broker,
		func() bool { return proc.PortOpen(s.Brokers) })
}

// Service returns the service name running the built binary bin with
// args and env, logging to name.log in the run directory; not started.
func (s *Stack) Service(name, bin string, args []string, env ...string) *proc.Proc {
	p := s.newProc(name, bin, args, env...)
	s.Services = append(s.Services, p)
	return p
}

func (s *Stack) newProc(name, bin string, args []string, env ...string) *proc.Proc {
	if addr := s.nextPprof(); addr != "" {
		s.logf("%s serves pprof on %s", name, addr)
		env = append(env, "ESKV_PPROF_ADDR="+addr)
	}
	return proc.New(proc.Spec{Name: name, Path: filepath.Join(s.Bin, bin), Args: args, Env: env, Dir: s.Dir,
		Log: filepath.Join(s.Dir, name+".log"), PassEnv: s.PassEnv})
}

// Env is the environment every writer and projector gets.
func (s *Stack) Env(logLevel string, partitions int) []string {
	db := s.DBURL
	if s.ServiceDBURL != "" {
		db = s.ServiceDBURL
	}
	return []string{"ESKV_BROKERS=" + s.Brokers, "ESKV_POSTGRES_URL=" + db, "ESKV_LOG_LEVEL=" + logLevel,
		fmt.Sprintf("ESKV_PARTITIONS=%d", partitions)}
}

// Procs returns the broker (when started) and the services, in start
// order.
func (s *Stack) Procs() []*proc.Proc {
	if s.Broker == nil {
		return s.Services
	}
	return append([]*proc.Proc{s.Broker}, s.Services...)
}

// LogTails writes the end of every process's log to w, without the lines
// that contain skip (when not empty).
func (s *Stack) LogTails(w io.Writer, skip string) {
	for _, p := range s.Procs() {
		fmt.Fprintf(w, "--- %s log (tail of %s) ---\n%s\n", p.Name, p.Log, proc.Tail(p.Log, 3000, skip))
	}
}

// StartupError is err with the tails of the logs.
func (s *Stack) StartupError(err error) error {
	var b strings.Builder
	s.LogTails(&b, "")
	return fmt.Errorf("%w\n%s", err, b.String())
}

// Stop stops the services (at the same time: writers leave their group,
// projectors commit), then the broker.
func (s *Stack) Stop() {
	proc.StopAll(15*time.Second, s.Services...)
	proc.StopAll(15*time.Second, s.Broker)
}

// Close stops the processes, drops the database and removes the run
// directory, unless keep.
func (s *Stack) Close(keep bool) {
	s.Stop()
	if s.DB != nil {
		s.DB.Close()
	}
	if keep {
		s.logf("kept logs and data in %s and database %s", strings.Join(append([]string{s.Dir}, s.extra...), " "), s.DBName)
		return
	}
	if s.DBName != "" {
		if err := dropDatabase(s.AdminURL, s.DBName); err != nil {
			s.logf("drop database %s: %v", s.DBName, err)
		}
	}
	for _, d := range append(s.extra, s.Dir) {
		if d != "" {
			os.RemoveAll(d)
		}
	}
}

func dropDatabase(adminURL, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// RandomHex returns n random bytes in hex, for run and database names.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// nextPprof returns the next process's pprof address: PprofBase's port
// plus the processes given one before (port 0 stays 0: a free port
// each); "" without PprofBase or when it is not a host:port.
func (s *Stack) nextPprof() string {
	host, port, err := net.SplitHostPort(s.PprofBase)
	n, perr := strconv.Atoi(port)
	if s.PprofBase == "" || err != nil || perr != nil {
		return ""
	}
	if n != 0 {
		n += s.pprofs
	}
	s.pprofs++
	return net.JoinHostPort(host, strconv.Itoa(n))
}
