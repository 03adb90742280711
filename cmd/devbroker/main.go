// Command devbroker is the local stack's Kafka-protocol broker: franz-go's
// kfake as a single node on 127.0.0.1 (or another address of this
// machine, for the chaos harness's network namespaces), writing every batch to a data
// directory before it answers, so a kill -9 loses nothing that was
// acknowledged (-sync adds an fsync per write, for a machine crash too).
//
// It creates no topics; the writer does. It is for development only: it is
// not Apache Kafka (docs/architecture.md, "Where kfake differs from Apache Kafka").
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eskv/eskv/internal/service"
)

// clusterID is fixed so that restarts on the same data directory present
// the same cluster to clients.
const clusterID = "eskv-devbroker"

func main() { service.Main("devbroker", run) }

type config struct {
	addr     bindAddr
	dataDir  string
	logLevel slog.Level
	sync     bool
	pprof    string
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	c := config{addr: bindAddr{port: 19092}, logLevel: slog.LevelWarn}
	f := c.flags(stderr)
	if err := f.Parse(args); err != nil {
		return config{}, err
	}
	return c, f.Check(c.dataDir != "", "data", "must not be empty")
}

// flags returns the broker's flags, bound to c.
func (c *config) flags(stderr io.Writer) *service.Flags {
	f := service.NewFlags("devbroker", stderr)
	// The broker's own settings read ESKV_BROKER_…: ESKV_LOG_LEVEL is the
	// services'.
	own := f.Scope("ESKV_BROKER")
	own.Var(&c.addr, "addr", "port to listen on, on 127.0.0.1 (\"19092\", \":19092\" or \"127.0.0.1:19092\"; 0 picks a free port), or host:port with a specific IP address of this machine (the broker has no authentication: a non-loopback address exposes it)")
	f.Rename("addr", "ESKV_BROKER_PORT")
	own.StringVar(&c.dataDir, "data", ".eskv/broker", "directory the broker persists to; reloaded on start")
	own.TextVar(&c.logLevel, "log-level", slog.LevelWarn, "log `level`: debug, info, warn or error; info and debug include kfake's per-request logs")
	own.BoolVar(&c.sync, "sync", false,
		"fsync every write, so acknowledged writes survive a machine crash too; without it they survive a kill -9 of the broker, as with Kafka's default flush policy")
	service.BindPprof(f, &c.pprof)
	return f
}

// bindAddr is where the broker listens: a port, given bare or as
// host:port whose host is empty, loopback or a specific IP address (kfake
// advertises the address it listens on, so an unspecified one such as
// 0.0.0.0 would not be reachable as advertised).
type bindAddr struct {
	host string // "" for 127.0.0.1
	port int
}

func (a *bindAddr) String() string {
	if a.host == "" {
		return strconv.Itoa(a.port)
	}
	return net.JoinHostPort(a.host, strconv.Itoa(a.port))
}

func (a *bindAddr) Set(addr string) error {
	host, p := "", addr
	if strings.Contains(addr, ":") {
		var err error
		if host, p, err = net.SplitHostPort(addr); err != nil {
			return err
		}
		switch ip := net.ParseIP(host); {
		case host == "", host == "127.0.0.1", host == "localhost":
			host = ""
		case ip == nil:
			return errors.New("the host must be an IP address")
		case ip.IsUnspecified():
			return errors.New("the host must be a specific address the clients reach (kfake advertises it), not " + host)
		}
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return errors.New("not a port")
	}
	*a = bindAddr{host: host, port: n}
	return nil
}

// listen binds a's host, or kfake's 127.0.0.1.
func (a bindAddr) listen(network, address string) (net.Listener, error) {
	if a.host != "" {
		_, port, _ := net.SplitHostPort(address)
		address = net.JoinHostPort(a.host, port)
	}
	return net.Listen(network, address)
}

func run(ctx context.Context, args []string, _, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// Our own lines (address, start, stop) are always at info; -log-level
	// filters what kfake says.
	log := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: min(cfg.logLevel, slog.LevelInfo)}))
	// The services' GC target: kfake keeps little live (its records are
	// in the data directory) and allocates every request's batches, so at
	// Go's 100 it collected every few MB, 94 times in 20 s of make
	// chaos's hostile phase, each stopping every request it served.
	service.SetGCDefault(log)
	// One processor unless GOMAXPROCS says otherwise: kfake serves every
	// request in one goroutine, and its connections' goroutines only hand
	// requests to it and answers back; with a processor each, every
	// hand-off woke another thread. Figure 18 of docs/performance.md, 3
	// runs each on a 2-CPU VM: the broker's CPU per write 14 % less, a lone
	// client's CAS p50 8 % shorter (0.86–0.88 ms, then 0.79–0.82).
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(1)
	}

	if err := os.MkdirAll(cfg.dataDir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(cfg.addr.port),
		kfake.ListenFn(cfg.addr.listen),
		kfake.ClusterID(clusterID),
		kfake.DataDir(cfg.dataDir),
		kfake.WithLogger(kfakeLogger{log: log, min: cfg.logLevel}),
		kfake.BrokerConfigs(map[string]string{
			// Kafka's default, stated so the writer's transaction
			// timeout is checked against a known ceiling.
			"transaction.max.timeout.ms": "900000",
			// The writers' default session timeout (3 s, for takeovers
			// within 5 s) is below Kafka's default minimum (6 s): the
			// setting an operator makes on the brokers for it.
			"group.min.session.timeout.ms": "1000",
			// kfake's compaction ignores the last stable offset (it can
			// drop a key's committed value while a transaction is open),
			// so compact rarely: hourly, not Kafka's 15 s.
			"log.cleaner.backoff.ms": "3600000",
		}),
	}
	if cfg.sync {
		opts = append(opts, kfake.SyncWrites())
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return fmt.Errorf("start broker: %w", err)
	}
	log.Info("broker listening", "addr", strings.Join(c.ListenAddrs(), ","),
		"data", cfg.dataDir, "cluster_id", clusterID, "fsync", cfg.sync)

	if err := servePprof(ctx, cfg.pprof, log); err != nil {
		c.Close()
		return err
	}
	<-ctx.Done() // a second signal now kills the process outright
	log.Info("broker stopping")
	c.Close()
	log.Info("broker stopped")
	return nil
}

// kfakeLogger bridges kfake's printf logger into slog, dropping what is
// below min.
type kfakeLogger struct {
	log *slog.Logger
	min slog.Level
}

func (l kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	case kfake.LogLevelInfo:
		lvl = slog.LevelInfo
	case kfake.LogLevelDebug:
		lvl = slog.LevelDebug
	default:
		return
	}
	if lvl < l.min {
		return
	}
	l.log.Log(context.Background(), lvl, fmt.Sprintf(format, args...), "component", "kfake")
}

// servePprof serves net/http/pprof on addr (when set) until ctx ends, so
// that the broker's CPU can be profiled under load like the services'.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	part, err := service.Pprof(addr, service.DefaultHTTPLimits(), log)
	if err != nil || part == nil {
		return err
	}
	go func() {
		if err := part(ctx); err != nil {
			log.Error("pprof stopped", "err", err)
		}
	}()
	return nil
}
