// Package stack runs eskv in the test's process — a kfake broker, a fresh
// Postgres database, the writer, the projector and the HTTP API on
// httptest — for end-to-end tests and tests of clients of the API (the Go
// client, kvctl).
package stack

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
	"github.com/eskv/eskv/watch"
	"github.com/eskv/eskv/writer"
)

// Tokens of the stack: DevToken may read and write tenant/; AcmeToken
// may read and write tenant/acme/; ReaderToken may only read
// tenant/acme/; WriterToken may only write tenant/acme/; AgentToken,
// of principal AgentPrincipal (an <agent>:<directive>), may read and
// write tenant/acme/.
const (
	DevToken    = "dev-token-0123456789abcdef"
	AcmeToken   = "acme-token-0123456789abcdef"
	ReaderToken = "reader-token-0123456789abcdef"
	WriterToken = "writer-token-0123456789abcdef"
	AgentToken  = "agent-token-0123456789abcdef"
	// AgentPrincipal is AgentToken's principal: agent acme-harvester
	// working for directive sync-onedrive.
	AgentPrincipal = "acme-harvester:sync-onedrive"
)

// Stack is eskv running in the test's process until the test ends.
type Stack struct {
	Broker   *testenv.Broker
	Postgres *testenv.Postgres
	// Store is the projection in Postgres, as the writer and the API
	// read it.
	Store  *projection.Store
	Writer *writer.Writer
	// Registry holds the writer's and the HTTP API's metrics; the API
	// serves it on /metrics.
	Registry *prometheus.Registry
	// Watches serves the API's watches.
	Watches *watch.Hub
	// URL is the HTTP API's base URL.
	URL string

	kafka kafkaconf.Conn
}

// Option changes what MustRun starts.
type Option func(*options)

type options struct {
	partitions       int32
	projector        bool
	projectorMayStop bool
	logs             io.Writer
	api              api.Config
	limits           *service.HTTPLimits
	broker           *testenv.Broker
	kafka            kafkaconf.Conn
	writer           func(*writer.Config)
	watch            watch.Config
	tls              *tls.Config
}

// Kafka runs the stack on broker (whose topics must exist), its writer,
// projector and watch hub connecting with conn (TLS, SASL), instead of
// on a plaintext broker of its own.
func Kafka(broker *testenv.Broker, conn kafkaconf.Conn) Option {
	return func(o *options) { o.broker, o.kafka = broker, conn }
}

// Partitions sets the partition count of the topics (default 2).
func Partitions(n int32) Option { return func(o *options) { o.partitions = n } }

// WithoutProjector starts no projector: the projection changes only
// when the test writes to it.
func WithoutProjector() Option { return func(o *options) { o.projector = false } }

// Logs sends the logs of every part of the stack, from level debug up, to
// w as JSON lines (by default they are discarded).
func Logs(w io.Writer) Option { return func(o *options) { o.logs = w } }

// ProjectorMayStop lets the projector stop with an error without failing
// the test, for tests that reset the changes topic under it.
func ProjectorMayStop() Option { return func(o *options) { o.projectorMayStop = true } }

// API sets the HTTP API's settings (its tokens and metrics are the
// stack's).
func API(cfg api.Config) Option { return func(o *options) { o.api = cfg } }

// HTTPLimits serves the API with these timeouts and header limit, as the
// writer command does (by default the stack's server has none).
func HTTPLimits(l service.HTTPLimits) Option { return func(o *options) { o.limits = &l } }

// WriterConfig changes the writer's settings (its brokers, topics and
// session timeout are the stack's): a short sweep interval or queue dedup
// window, for tests of the sweeper's requeues and of dedup windows.
func WriterConfig(f func(*writer.Config)) Option { return func(o *options) { o.writer = f } }

// Watches sets the watch limits of the stack's hub (MaxWatches,
// MaxWatchesPerPrincipal, Buffer, BufferBytes, MemoryBytes, Stall; its
// brokers and topic are the stack's).
func Watches(cfg watch.Config) Option { return func(o *options) { o.watch = cfg } }

// TLS serves the API over HTTPS with cfg, whose Certificates must hold
// one for 127.0.0.1 (httptest puts its own before a GetCertificate): the
// stack's URL is then https://.
func TLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// MustRun runs the stack until the test ends and returns it once the
// writer is ready. Its logs are discarded, unless the test asks for them
// (Logs) or runs with -v and ESKV_TEST_LOGS set: then they go to stderr.
func MustRun(tb testing.TB, opts ...Option) *Stack {
	tb.Helper()
	o := options{partitions: 2, projector: true}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Stack{Broker: o.broker, Postgres: testenv.MustPostgresDB(tb), Registry: prometheus.NewRegistry(), kafka: o.kafka}
	if s.Broker == nil {
		s.Broker = testenv.MustBroker(tb, o.partitions)
	}
	s.Store = projection.New(s.Postgres.Pool)
	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	switch {
	case o.logs != nil:
		log = slog.New(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	case testing.Verbose() && os.Getenv("ESKV_TEST_LOGS") != "":
		log = slog.New(slog.NewJSONHandler(os.Stderr, nil))
	}
	wcfg := writer.Config{Brokers: s.Broker.Addrs, Kafka: s.kafka, Topics: s.Broker.Topics, SessionTimeout: 6 * time.Second}
	if o.writer != nil {
		o.writer(&wcfg)
	}
	w, err := writer.New(wcfg, s.Store, log, s.Registry)
	if err != nil {
		tb.Fatal(err)
	}
	s.Writer = w
	testenv.RunUntilCleanup(tb, "writer", w.Run)
	if o.projector {
		s.runProjector(tb, log, o.projectorMayStop)
	}
	wc := o.watch
	wc.Brokers, wc.Kafka, wc.Topic, wc.Partitions = s.Broker.Addrs, s.kafka, s.Broker.Topics.Changes, s.Broker.Topics.Partitions
	hub, err := watch.New(wc, s.Store, log, s.Registry)
	if err != nil {
		tb.Fatal(err)
	}
	s.Watches = hub
	cfg := o.api
	cfg.Tokens, cfg.Gatherer, cfg.Registerer = mustTokens(tb), s.Registry, s.Registry
	if cfg.Watch == nil {
		cfg.Watch = hub
	}
	if cfg.UILogouts == nil {
		cfg.UILogouts = s.Store
	}
	srv, err := api.New(cfg, w, s.Store, log)
	if err != nil {
		tb.Fatal(err)
	}
	hs := httptest.NewUnstartedServer(srv.Handler())
	if o.limits != nil {
		o.limits.Apply(hs.Config)
	}
	if o.tls != nil {
		hs.TLS = o.tls
		hs.StartTLS()
	} else {
		hs.Start()
	}
	tb.Cleanup(hs.Close)  // before the writer and projector stop
	tb.Cleanup(hub.Close) // before the server closes: it waits for the watches
	s.URL = hs.URL
	testenv.WaitFor(tb, 30*time.Second, "writer ready", w.Ready)
	return s
}

// MustStart runs the stack with its defaults until the test ends and
// returns the API's URL once the writer is ready.
func MustStart(tb testing.TB) string {
	tb.Helper()
	return MustRun(tb).URL
}

// WaitFor polls cond until it holds, failing the test after 30 seconds.
// It is testenv.WaitFor with the stack's patience.
func WaitFor(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	testenv.WaitFor(tb, 30*time.Second, what, cond)
}

func (s *Stack) runProjector(tb testing.TB, log *slog.Logger, mayStop bool) {
	tb.Helper()
	p, err := projector.New(projector.Config{Brokers: s.Broker.Addrs, Kafka: s.kafka, Topic: s.Broker.Topics.Changes, Partitions: s.Broker.Topics.Partitions},
		s.Store, log, nil)
	if err != nil {
		tb.Fatal(err)
	}
	run := p.Run
	if mayStop {
		run = func(ctx context.Context) error {
			if err := p.Run(ctx); err != nil {
				log.Info("projector stopped", "err", err)
			}
			return nil
		}
	}
	testenv.RunUntilCleanup(tb, "projector", run)
}

func mustTokens(tb testing.TB) *api.Tokens {
	tb.Helper()
	tokens, err := api.NewTokens([]api.TokenConfig{
		api.DevToken(DevToken),
		{Token: AcmeToken, Principal: "acme-svc", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read, api.Write}}}},
		{Token: ReaderToken, Principal: "acme-reader", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read}}}},
		{Token: WriterToken, Principal: "acme-writer", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Write}}}},
		{Token: AgentToken, Principal: AgentPrincipal, Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read, api.Write}}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return tokens
}
