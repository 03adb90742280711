// Command writer serves eskv's HTTP API and appends validated writes to
// kv.changes for the partitions it owns.
package main

import (
	"bytes"
	"cmp"

	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/buildinfo"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/secure"
	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/watch"
	"github.com/eskv/eskv/writer"
)

func main() { service.Main("writer", run) }

// config is the writer's configuration; every field is a flag whose
// default comes from an ESKV_ environment variable.
type config struct {
	kafka            service.Kafka
	postgres         service.Postgres
	logLevel         *slog.Level
	logFlush         *time.Duration
	httpAddr         string
	addrFile         string
	createTopics     bool
	devToken         string
	tokensFile       string
	tokensPoll       time.Duration
	maxValueBytes    int
	instanceID       string
	pprofAddr        string
	advertiseURL     string
	sweepInterval    time.Duration
	maxOverlay       int
	stateCacheBytes  int64
	maxListWait      time.Duration
	roundGather      time.Duration
	readLease        time.Duration
	sessionTimeout   time.Duration
	txnTimeout       time.Duration
	queueDedupWindow time.Duration
	requestWindow    int
	requestAge       time.Duration
	http             service.HTTPLimits
	maxListBytes     int
	maxLists         int
	maxListsEach     int
	maxWaiters       int
	maxWaitersEach   int
	maxBodyBytes     int64
	maxBodyEach      int64
	metricsAddr      string
	metricsToken     string
	maxWatches       int
	principalWatches int
	watchBuffer      int
	watchBufferBytes int64
	watchMemory      int64
	watchStall       time.Duration
	heartbeat        time.Duration
	fetchWait        time.Duration
	uiKeyFile        string
	uiSessionTTL     time.Duration
	auditorGroup     string
	auditorURL       string
	auditorToken     string
	peerSecret       string
	peerSecretFile   string
	requestTimeout   time.Duration
	compression      string
	tlsCertFile      string
	tlsKeyFile       string
	tlsCAFile        string
	corsOrigins      string
}

func parse(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	f := c.flags(stderr)
	if err := f.Parse(args); err != nil {
		return nil, err
	}
	return c, c.check(f)
}

// flags returns the writer's flags, bound to c.
func (c *config) flags(stderr io.Writer) *service.Flags {
	host, _ := os.Hostname()
	f := service.NewFlags("writer", stderr)
	f.StringVar(&c.httpAddr, "http-addr", "127.0.0.1:8080", "HTTP listen address")
	c.kafka.Bind(f)
	c.kafka.BindConflicts(f)
	f.StringVar(&c.compression, "kafka-compression", kafkaconf.DefaultCompression, "codec of the batches produced to the changes and conflicts topics: "+
		strings.Join(kafkaconf.CompressionNames(), ", ")+"; none, the default, is read by every Kafka client at no CPU cost (docs/consumers.md)")
	c.postgres.Bind(f)
	f.BoolVar(&c.createTopics, "create-topics", true, "create missing topics at start")
	f.StringVar(&c.devToken, "dev-token", "", "a bearer token with read and write rights on every tenant, for local use")
	f.StringVar(&c.tokensFile, "tokens-file", "", "JSON file of bearer tokens and their grants")
	f.DurationVar(&c.tokensPoll, "tokens-poll", api.DefaultTokensPoll, "how often the tokens file is read to reload it when its content changed (SIGHUP reloads it at once); a file that does not load keeps the tokens in force")
	f.IntVar(&c.maxValueBytes, "max-value-bytes", contract.DefaultMaxValueBytes, "largest serialized value accepted")
	f.StringVar(&c.instanceID, "instance-id", "writer-"+host, "static group member id; unique per writer")
	f.Rename("instance-id", "ESKV_WRITER_ID")
	c.logLevel = service.LogLevel(f, slog.LevelInfo)
	c.logFlush = service.LogFlush(f)
	f.StringVar(&c.addrFile, "addr-file", "", "write the bound HTTP address to this file once listening")
	f.StringVar(&c.advertiseURL, "advertise-url", "", "base URL other writers forward this writer's requests to (default http://<bound http address>)")
	c.bindDiagnostics(f)
	f.DurationVar(&c.sweepInterval, "sweep-interval", time.Second, "how often the TTL sweeper appends expire events for entries past their expiry; reads hide them at once regardless; negative disables it")
	f.DurationVar(&c.queueDedupWindow, "queue-dedup-window", writer.DefaultQueueDedupWindow, "how long a queue push's dedupId makes a repeated push with the same id add nothing (the earlier item is kept, as done once acknowledged, for this long)")
	f.DurationVar(&c.readLease, "read-lease", writer.DefaultReadLease, "how long after a transaction round's group fence was sent reads are answered without waiting for the next one (a bound on time: docs/guarantees.md); a writer also waits this long after taking a partition before serving it, never less than 500ms (leases off included), so every writer of a group must use the same value, or 0 on some and 500ms on the others; 0 disables leases")
	f.DurationVar(&c.sessionTimeout, "kafka-session-timeout", 0, "the writer group's session timeout: a writer that stops heartbeating (killed, cut off) loses its partitions to the others this long after its last heartbeat, so a takeover takes about this long; heartbeats go every third of it; 0 chooses 3s, or the brokers' group.min.session.timeout.ms when it is larger (Kafka's default is 6s: set it to 3000 on the brokers for 3s); a value outside the brokers' bounds stops the writer at start")
	f.DurationVar(&c.txnTimeout, "kafka-transaction-timeout", 10*time.Second, "the Kafka transaction timeout of the writer's producers: the brokers abort a transaction open this long, so a writer killed in the middle of one holds its partitions' last stable offset, and their takeover, this long at most (plus the brokers' transaction.abort.timed.out.transaction.cleanup.interval.ms, 10s by default, on Apache Kafka); also the longest a transaction round may take; at most the brokers' transaction.max.timeout.ms")
	f.IntVar(&c.maxOverlay, "max-overlay", 100_000, "per partition, the keys whose latest change the projector has not applied yet beyond which writes answer 503 (backpressure while the projector is down)")
	f.Int64Var(&c.stateCacheBytes, "state-cache-bytes", writer.DefaultStateCacheBytes, "about the memory the states of keys the projector applied may take, kept so that reads and writes of them skip Postgres; split evenly over the topic's partitions; 0 disables the cache")
	f.DurationVar(&c.maxListWait, "max-list-wait", writer.DefaultMaxListWait, "how long a listing waits for the projector to apply the writes under its prefix acknowledged before it arrived; beyond it the listing answers 503 with Retry-After")
	f.DurationVar(&c.roundGather, "round-gather", writer.DefaultRoundGather, "how long a Kafka transaction round waits, at most, for the next batch of each partition the previous round answered (so that busy partitions share rounds instead of alternating); a partition with nothing queued ends the wait at once; 0 starts each round with whatever is queued")
	f.IntVar(&c.requestWindow, "request-id-window", writer.DefaultRequestIDWindow, "per key, how many of its latest versions remember their requestId: retrying any of them is answered as a replay (the latest) or 409 version_conflict (an older one), never applied twice; 1 remembers only the latest write's")
	f.DurationVar(&c.requestAge, "request-id-age", writer.DefaultRequestIDAge, "how long after its write a requestId is remembered on its key however many versions the key gets meanwhile (a hot key passes request-id-window versions in seconds): a retry within it is never applied twice; keep it longer than clients retry (the Go client's schedule, a retry after a writer restart); 0 counts versions only")
	f.DurationVar(&c.requestTimeout, "request-timeout", api.DefaultRequestTimeout, "longest time a request (but a watch) waits for the brokers, Postgres or the partition's answer; then a write handed to its partition answers 503 outcome_unknown (retry it with the same requestId), anything else 503 partition_unavailable, both with Retry-After")
	f.IntVar(&c.maxListBytes, "max-list-bytes", api.DefaultMaxListBytes, "byte budget of one page of a listing (about its entries' JSON); a page that reaches it is answered truncated, with a cursor, and always holds at least one entry")
	c.bindLimits(f)
	c.bindWatch(f)
	c.bindSecrets(f)
	c.bindTLS(f)
	c.http.Bind(f)
	return f
}

// check returns an error naming each setting of f out of its range.
func (c *config) check(f *service.Flags) error {
	return errors.Join(
		f.Positive("partitions", "max-value-bytes", "max-overlay", "request-id-window", "max-list-bytes", "max-watches", "watch-buffer"),
		c.checkLimits(f),
		c.checkWatch(f),
		f.Check(c.maxListWait > 0, "max-list-wait", "must be positive"),
		f.Check(c.requestTimeout > 0, "request-timeout", "must be positive"),
		f.Check(c.roundGather >= 0 && c.roundGather <= 100*time.Millisecond, "round-gather", "must be a duration from 0 to 100ms"),
		f.Check(*c.logFlush >= 0 && *c.logFlush <= time.Second, "log-flush", "must be a duration from 0 to 1s"),
		f.Check(c.queueDedupWindow > 0, "queue-dedup-window", "must be positive"),
		f.Check(c.requestAge >= 0, "request-id-age", "must not be negative (0 counts versions only)"),
		f.Check(c.readLease >= 0 && c.readLease <= 10*time.Second, "read-lease", "must be a duration from 0 to 10s (0 disables leases)"),
		f.Check(c.sessionTimeout == 0 || (c.sessionTimeout >= time.Second && c.sessionTimeout <= 5*time.Minute), "kafka-session-timeout",
			"must be 0 (3s, or the brokers' minimum) or a duration from 1s to 5m"),
		f.Check(c.txnTimeout >= time.Second && c.txnTimeout <= 15*time.Minute, "kafka-transaction-timeout", "must be a duration from 1s to 15m"),
		f.Check(c.tokensPoll > 0, "tokens-poll", "must be positive"),
		f.Check(c.uiSessionTTL > 0, "ui-session-ttl", "must be positive"),
		f.Check(c.sweepInterval != 0, "sweep-interval", "must not be 0 (negative disables the sweeper)"),
		f.Check(c.stateCacheBytes >= 0, "state-cache-bytes", "must not be negative (0 disables the cache)"),
		c.http.Check(f),
		c.checkTLS(f),
		c.kafka.Check(),
		c.checkCompression(),
	)
}

// checkCompression checks -kafka-compression.
func (c *config) checkCompression() error {
	_, err := kafkaconf.Compression(c.compression)
	return err
}

// bindTLS defines the settings of HTTPS and of the browser pages allowed
// to call the API (CORS).
func (c *config) bindTLS(f *service.Flags) {
	f.StringVar(&c.tlsCertFile, "tls-cert-file", "", "PEM certificate (chain) the API and the status page are served with over HTTPS (TLS 1.2 at least), with -tls-key-file; reloaded when the files change (polled every 5s) and on SIGHUP, a pair that does not load keeping the one in force; unset: plain HTTP")
	f.StringVar(&c.tlsKeyFile, "tls-key-file", "", "PEM private key of -tls-cert-file")
	f.StringVar(&c.tlsCAFile, "tls-ca-file", "", "PEM roots this writer trusts when it forwards requests to other writers over HTTPS (their advertise URLs are https://); unset: the system's roots")
	f.StringVar(&c.corsOrigins, "cors-allowed-origins", "", "comma-separated origins (scheme://host[:port], exactly) of the browser pages allowed to call /v1 with a bearer token (CORS; preflights are answered without a token); unset: no CORS headers")
}

// checkTLS checks the HTTPS and CORS settings.
func (c *config) checkTLS(f *service.Flags) error {
	var cors error
	if err := api.CheckCORSOrigins(c.corsAllowedOrigins()); err != nil {
		cors = f.Check(false, "cors-allowed-origins", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return errors.Join(
		f.Check((c.tlsCertFile == "") == (c.tlsKeyFile == ""), "tls-cert-file", "and -tls-key-file (ESKV_TLS_KEY_FILE) go together: set both or neither"),
		cors,
	)
}

// corsAllowedOrigins is -cors-allowed-origins as a list.
func (c *config) corsAllowedOrigins() []string {
	var out []string
	for o := range strings.SplitSeq(c.corsOrigins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, o)
		}
	}
	return out
}

// serverTLS returns the HTTPS configuration, with the part that reloads
// the certificate on SIGHUP and when its files change; nil, nil without
// a certificate (plain HTTP). A pair that does not load is an error.
func (c *config) serverTLS(reg prometheus.Registerer, log *slog.Logger) (*tls.Config, func(context.Context) error, error) {
	if c.tlsCertFile == "" {
		return nil, nil, nil
	}
	r, err := service.NewCertReloader(c.tlsCertFile, c.tlsKeyFile, reg, log)
	if err != nil {
		return nil, nil, fmt.Errorf("ESKV_TLS_CERT_FILE, ESKV_TLS_KEY_FILE: %w", err)
	}
	return r.ServerConfig(), func(ctx context.Context) error {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		return r.Run(ctx, service.DefaultCertPoll, hup)
	}, nil
}

// httpsConfig is the writer's TLS: its server's (nil: plain HTTP) with
// the part that reloads its certificate, and its forwards'.
type httpsConfig struct {
	server, forward *tls.Config
	reload          func(context.Context) error
}

// https returns the writer's TLS configurations from the settings.
func (c *config) https(reg prometheus.Registerer, log *slog.Logger) (httpsConfig, error) {
	var h httpsConfig
	var err error
	if h.server, h.reload, err = c.serverTLS(reg, log); err != nil {
		return h, err
	}
	h.forward, err = c.forwardTLS()
	return h, err
}

// defaultAdvertiseURL sets the advertise URL, when unset, to the bound
// address addr, https:// when the writer serves HTTPS.
func (c *config) defaultAdvertiseURL(addr string, https bool) {
	if c.advertiseURL != "" {
		return
	}
	c.advertiseURL = "http://" + addr
	if https {
		c.advertiseURL = "https://" + addr
	}
}

// forwardTLS returns the TLS configuration of forwards to other writers:
// the roots of ESKV_TLS_CA_FILE, or nil (the system's).
func (c *config) forwardTLS() (*tls.Config, error) {
	name := func(short string) string { return "-" + short + " (" + secure.Variable(short) + ")" }
	return secure.TLS{CAFile: c.tlsCAFile}.Config(name, false, "")
}

// bindSecrets defines the flags of the secrets the writers of a
// deployment share: the status page's key and the peer secret.
func (c *config) bindSecrets(f *service.Flags) {
	f.StringVar(&c.uiKeyFile, "ui-key-file", "", "file of the status page's secret (at least 32 bytes, shared by the writers of a deployment): it signs /ui/ session cookies and keys value fingerprints; empty draws a random key per process (a session then works only on the writer that made it)")
	f.DurationVar(&c.uiSessionTTL, "ui-session-ttl", api.DefaultUISessionTTL, "how long a status page (/ui/) login lasts (at most until its token expires)")
	f.StringVar(&c.auditorGroup, "auditor-group", api.DefaultAuditorGroup, "the auditor's consumer group, whose committed offsets the console's health view (/ui/#/health) shows as the auditor's position")
	f.StringVar(&c.auditorURL, "auditor-url", "", "base URL of the auditor's health server (its ESKV_AUDITOR_ADDR, e.g. http://auditor:8082), whose GET /verification (the last periodic verification) the console's health view shows and alerts on, asked within 1 s; empty: the view says the auditor is not configured")
	f.StringVar(&c.auditorToken, "auditor-token", "", "bearer token the auditor's GET /verification requires (the auditor's ESKV_METRICS_TOKEN); empty: this writer's own -metrics-token")
	f.StringVar(&c.peerSecret, "peer-secret", "", "secret shared by the writers of a deployment (at least 32 bytes; openssl rand -hex 32) with which they prove to each other the requests they forward; unset: a writer takes other writers' forwards for clients' requests (a single writer needs none)")
	f.StringVar(&c.peerSecretFile, "peer-secret-file", "", "file holding the peer secret (instead of ESKV_PEER_SECRET)")
}

// bindWatch defines the settings of the watches (GET /v1/watch) on f.
func (c *config) bindWatch(f *service.Flags) {
	f.IntVar(&c.maxWatches, "max-watches", watch.DefaultMaxWatches, "watches (GET /v1/watch) served at once; beyond it they answer 503 too_many_watches with Retry-After")
	f.IntVar(&c.principalWatches, "max-watches-per-principal", 0, "watches one principal may hold on this writer; beyond it they answer 429 too_many_requests with Retry-After (0: a tenth of -max-watches, at least 1)")
	f.IntVar(&c.watchBuffer, "watch-buffer", watch.DefaultBuffer, "events a watch may fall behind its client before it is ended with slow_consumer and a cursor to resume after")
	f.Int64Var(&c.watchBufferBytes, "watch-buffer-bytes", watch.DefaultBufferBytes, "bytes of events a watch may fall behind its client (an event counts its record's size and 512 bytes) before it is ended with slow_consumer; at least 16384")
	f.Int64Var(&c.watchMemory, "watch-memory-bytes", watch.DefaultMemoryBytes, "memory of the watches catching up from a cursor, 2 × -watch-buffer-bytes each (a principal a quarter of it); a watch from a cursor that gets none within 1s answers 429 too_many_requests; at least 2 × -watch-buffer-bytes")
	f.DurationVar(&c.watchStall, "watch-stall-timeout", watch.DefaultStall, "how long a watch waits for its client to take an event before it is ended with slow_consumer and its buffer dropped")
	f.DurationVar(&c.heartbeat, "watch-heartbeat", api.DefaultWatchHeartbeat, "how often an idle watch sends a comment so that proxies keep it open")
	f.DurationVar(&c.fetchWait, "watch-fetch-wait", watch.DefaultFetchWait, "how long a watch's read of the log waits for more records (at least 10ms): the delivery delay of a quiet partition, traded for fewer reads under load")
}

// checkWatch checks the settings of the watches (the positive counts
// are checked with the others).
func (c *config) checkWatch(f *service.Flags) error {
	return errors.Join(
		f.Check(c.heartbeat > 0, "watch-heartbeat", "must be positive"),
		f.Check(c.principalWatches >= 0, "max-watches-per-principal", "must not be negative (0: a tenth of -max-watches)"),
		f.Check(c.watchBufferBytes >= 16<<10, "watch-buffer-bytes", "must be at least 16384"),
		f.Check(c.watchMemory >= 2*c.watchBufferBytes, "watch-memory-bytes", "must be at least twice -watch-buffer-bytes"),
		f.Check(c.watchStall > 0, "watch-stall-timeout", "must be positive"),
		f.Check(c.fetchWait >= 10*time.Millisecond, "watch-fetch-wait", "must be at least 10ms"),
	)
}

// bindDiagnostics defines where pprof is served, and where and to whom
// /metrics is.
func (c *config) bindDiagnostics(f *service.Flags) {
	service.BindPprof(f, &c.pprofAddr)
	f.StringVar(&c.metricsAddr, "metrics-addr", "", "serve GET /metrics on this address of its own (port 0 picks a free one, logged at info), and not on http-addr; empty: on http-addr, beside the API")
	service.BindMetricsToken(f, &c.metricsToken)
}

// bindLimits defines the flags of the shared slots and their shares.
func (c *config) bindLimits(f *service.Flags) {
	f.IntVar(&c.maxLists, "max-concurrent-lists", api.DefaultMaxConcurrentLists, "pages of the projection answered at once (listings, scans, histories, smembers, lrange, qpeek, the status page's), from the query to the answer's last byte; beyond it they answer 429 too_many_requests with Retry-After")
	f.IntVar(&c.maxListsEach, "max-lists-per-principal", api.DefaultMaxListsPerPrincipal, "each principal's share of max-concurrent-lists; beyond it its reads of pages answer 429 too_many_requests with Retry-After")
	f.IntVar(&c.maxWaiters, "max-waiters", api.DefaultMaxWaiters, "requests waiting at once (qpop, lpop, rpop and lock acquire with wait=); beyond it they answer 429 too_many_requests with Retry-After")
	f.IntVar(&c.maxWaitersEach, "max-waiters-per-principal", api.DefaultMaxWaitersPerPrincipal, "each principal's share of max-waiters; beyond it its waiting requests answer 429 too_many_requests with Retry-After")
	f.Int64Var(&c.maxBodyBytes, "max-body-bytes", 0, "bytes of request bodies in memory at once, from the first byte read (before it, with a declared length) until the answer; beyond it requests answer 429 too_many_requests before their body is read; 0: 64 MiB, or 4 shares when max-body-bytes-per-principal is larger than 16 MiB")
	f.Int64Var(&c.maxBodyEach, "max-body-bytes-per-principal", 0, "each principal's (or, before authentication, remote address's) share of max-body-bytes, more than the largest request body (4 MiB with the default max-value-bytes, else 2 × max-value-bytes + 16 KiB); 0: 16 MiB, or the largest body + 1 when larger")
}

// checkLimits returns an error naming each flag of bindLimits whose value
// is out of its range.
func (c *config) checkLimits(f *service.Flags) error {
	largest := int64(api.LargestBody(c.maxValueBytes))
	return errors.Join(
		f.Positive("max-concurrent-lists", "max-lists-per-principal", "max-waiters", "max-waiters-per-principal"),
		f.Check(c.maxBodyEach == 0 || c.maxBodyEach > largest, "max-body-bytes-per-principal",
			fmt.Sprintf("must be 0 (the default) or more than the largest request body (%d bytes)", largest)),
		f.Check(c.maxBodyBytes == 0 || c.maxBodyBytes >= max(c.maxBodyEach, largest+1), "max-body-bytes",
			"must be 0 (the default) or at least max-body-bytes-per-principal and more than the largest request body"),
	)
}

// tokens returns the configured bearer tokens (at least one) and, with a
// tokens file, the part that reloads it on SIGHUP and when it changes.
func (c *config) tokens(reg prometheus.Registerer, log *slog.Logger) (*api.Tokens, func(context.Context) error, error) {
	var extra []api.TokenConfig
	if c.devToken != "" {
		extra = append(extra, api.DevToken(c.devToken))
	}
	if c.tokensFile == "" {
		if len(extra) == 0 {
			return nil, nil, errors.New("no tokens configured: set ESKV_DEV_TOKEN or ESKV_TOKENS_FILE")
		}
		t, err := api.NewTokens(extra)
		return t, nil, err
	}
	r, err := api.NewTokenReloader(c.tokensFile, extra, reg, log)
	if err != nil {
		return nil, nil, err
	}
	return r.Tokens(), func(ctx context.Context) error {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		return r.Run(ctx, c.tokensPoll, hup)
	}, nil
}

// checkAdvertise refuses to start with an advertise URL other writers
// cannot reach this one at: an unspecified host in ESKV_ADVERTISE_URL,
// or no ESKV_ADVERTISE_URL while ESKV_HTTP_ADDR listens on every
// interface (the default URL would then be http://0.0.0.0:… or
// http://[::]:…, and every other writer would forward to itself).
func (c *config) checkAdvertise() error {
	if c.advertiseURL != "" {
		return writer.CheckAdvertiseURL(c.advertiseURL)
	}
	host, _, err := net.SplitHostPort(c.httpAddr)
	if err != nil {
		return fmt.Errorf("ESKV_HTTP_ADDR=%q: %w", c.httpAddr, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("%s is unset and ESKV_HTTP_ADDR=%q listens on every interface, so no address to advertise to other writers is known: "+
			"set %s to the URL other writers reach this one at (on Kubernetes http://$(POD_IP):8080)", writer.AdvertiseSetting, c.httpAddr, writer.AdvertiseSetting)
	}
	return nil
}

// codec is the codec -kafka-compression names (checked by check).
func (c *config) codec() kgo.CompressionCodec {
	codec, _ := kafkaconf.Compression(c.compression)
	return codec
}

func run(ctx context.Context, args []string, _, stderr io.Writer) error {
	c, err := parse(args, stderr)
	if err != nil {
		return err
	}
	if err := c.checkAdvertise(); err != nil {
		return err
	}
	// An INFO line per write: buffered (service.BufferedLogger).
	log, closeLog := service.BufferedLogger(stderr, *c.logLevel, "writer", *c.logFlush)
	defer closeLog()
	service.SetGCDefault(log)
	reg := service.NewRegistry()
	tt, reloadTokens, err := c.tokens(reg, log)
	if err != nil {
		return err
	}
	uiKey, err := c.uiKey(log)
	if err != nil {
		return err
	}
	peerSecret, err := c.peerSecretBytes(log)
	if err != nil {
		return err
	}
	tlsc, err := c.https(reg, log)
	if err != nil {
		return err
	}
	ln, err := service.Listen(c.httpAddr)
	if err != nil {
		return err
	}
	defer ln.Close()
	c.defaultAdvertiseURL(ln.Addr().String(), tlsc.server != nil)
	// Until the projection answers: /healthz 200, everything else 503.
	starting := service.Starting(log, service.HTTP{Listener: ln, AddrFile: c.addrFile, Limits: c.http, TLS: tlsc.server})
	defer starting()
	pool, err := c.postgres.OpenProjection(ctx, reg, log)
	if err != nil {
		return err
	}
	defer pool.Close()
	store := projection.New(pool)

	w, err := writer.New(c.writerConfig(), store, log, reg)
	if err != nil {
		return err
	}
	hub, err := c.watchHub(store, log, reg)
	if err != nil {
		return err
	}
	// Watches never end on their own: they end when the process is
	// told to stop, before the HTTP server drains its requests.
	defer context.AfterFunc(ctx, hub.Close)()
	// So are blocking waits: answered 503 at once, retried elsewhere.
	defer context.AfterFunc(ctx, w.StopWaits)()
	acfg := c.apiConfig(tt, reg, store.Ready, hub, uiKey, store, peerSecret)
	acfg.ForwardTLS = tlsc.forward
	srv, err := api.New(acfg, w, store, log)
	if err != nil {
		return err
	}
	parts := []func(context.Context) error{w.Run, hub.Run}
	for _, p := range []func(context.Context) error{reloadTokens, tlsc.reload} {
		if p != nil {
			parts = append(parts, p)
		}
	}
	if parts, err = service.WithPprof(c.pprofAddr, c.http, log, parts...); err != nil {
		return err
	}
	if serveMetrics, err := service.ServeMetrics(c.metricsAddr, c.http, service.MetricsHandler(reg, c.metricsToken), log); err != nil {
		return err
	} else if serveMetrics != nil {
		parts = append(parts, serveMetrics)
	}
	return service.Serve(ctx, log, "writer", service.HTTP{Listener: starting(), AddrFile: c.addrFile, Handler: srv.Handler(), Limits: c.http, Registerer: reg, TLS: tlsc.server}, parts...)
}

// apiConfig is the API's configuration from the settings: metrics are
// served on the API's address unless on one of their own.
func (c *config) apiConfig(tt *api.Tokens, reg *prometheus.Registry, ready func(context.Context) error, hub *watch.Hub, uiKey []byte,
	logouts api.UILogouts, peerSecret []byte) api.Config {
	var metrics prometheus.Gatherer = reg
	if c.metricsAddr != "" {
		metrics = nil
	}
	return api.Config{
		Build:                    buildinfo.Get(),
		MaxValueBytes:            c.maxValueBytes,
		Tokens:                   tt,
		Gatherer:                 metrics,
		MetricsToken:             c.metricsToken,
		Registerer:               reg,
		Ready:                    ready,
		RequestTimeout:           c.requestTimeout,
		InstanceID:               c.instanceID,
		AdvertiseURL:             c.advertiseURL,
		MaxListBytes:             c.maxListBytes,
		MaxConcurrentLists:       c.maxLists,
		MaxListsPerPrincipal:     c.maxListsEach,
		MaxWaiters:               c.maxWaiters,
		MaxWaitersPerPrincipal:   c.maxWaitersEach,
		MaxBodyBytes:             c.maxBodyBytes,
		MaxBodyBytesPerPrincipal: c.maxBodyEach,
		Watch:                    hub,
		WatchHeartbeat:           c.heartbeat,
		UIKey:                    uiKey,
		UISessionTTL:             c.uiSessionTTL,
		AuditorGroup:             c.auditorGroup,
		AuditorURL:               c.auditorURL,
		AuditorToken:             cmp.Or(c.auditorToken, c.metricsToken),
		UILogouts:                logouts,
		PeerSecret:               peerSecret,
		CORSAllowedOrigins:       c.corsAllowedOrigins(),
	}
}

// uiKey reads the status page's secret from ESKV_UI_KEY_FILE (its
// surrounding white space trimmed), or returns nil (a random key per
// process) and says so.
func (c *config) uiKey(log *slog.Logger) ([]byte, error) {
	if c.uiKeyFile == "" {
		log.Warn("ESKV_UI_KEY_FILE is unset: status page sessions work only on this writer and value fingerprints change at restart")
		return nil, nil
	}
	b, err := os.ReadFile(c.uiKeyFile)
	if err != nil {
		return nil, fmt.Errorf("ESKV_UI_KEY_FILE: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) < api.MinUIKeyBytes {
		return nil, fmt.Errorf("ESKV_UI_KEY_FILE %s: the key is %d bytes, at least %d are needed (openssl rand -hex 32)", c.uiKeyFile, len(b), api.MinUIKeyBytes)
	}
	return b, nil
}

// peerSecretBytes reads the writers' shared forwarding secret from
// ESKV_PEER_SECRET or ESKV_PEER_SECRET_FILE (its surrounding white space
// trimmed), or returns nil (this writer proves its forwards to itself
// alone) and says so. Errors never show the secret.
func (c *config) peerSecretBytes(log *slog.Logger) ([]byte, error) {
	var b []byte
	switch {
	case c.peerSecret != "" && c.peerSecretFile != "":
		return nil, errors.New("ESKV_PEER_SECRET and ESKV_PEER_SECRET_FILE are both set: set one")
	case c.peerSecretFile != "":
		var err error
		if b, err = os.ReadFile(c.peerSecretFile); err != nil {
			return nil, fmt.Errorf("ESKV_PEER_SECRET_FILE: %w", err)
		}
	case c.peerSecret != "":
		b = []byte(c.peerSecret)
	default:
		log.Info("ESKV_PEER_SECRET is unset: requests other writers forward here are taken for clients' requests " +
			"(set the same secret on every writer of a deployment of several)")
		return nil, nil
	}
	b = bytes.TrimSpace(b)
	if len(b) < api.MinPeerSecretBytes {
		return nil, fmt.Errorf("the peer secret (ESKV_PEER_SECRET or ESKV_PEER_SECRET_FILE) is %d bytes, at least %d are needed (openssl rand -hex 32)", len(b), api.MinPeerSecretBytes)
	}
	return b, nil
}

// writerConfig is the writer's configuration from the settings: a
// setting whose 0 turns its feature off reaches writer.Config through
// service.Off (a Config's 0 is its default).
func (c *config) writerConfig() writer.Config {
	return writer.Config{
		Brokers:            c.kafka.BrokerList(),
		Kafka:              c.kafka.Conn(),
		Topics:             c.kafka.Topics(),
		Compression:        c.codec(),
		CreateTopics:       c.createTopics,
		InstanceID:         c.instanceID,
		AdvertiseURL:       c.advertiseURL,
		Source:             "eskv-writer/" + c.instanceID,
		SweepInterval:      c.sweepInterval,
		MaxOverlay:         c.maxOverlay,
		StateCacheBytes:    service.Off(c.stateCacheBytes),
		RequestIDWindow:    c.requestWindow,
		RequestIDAge:       service.Off(c.requestAge),
		MaxListWait:        c.maxListWait,
		RoundGather:        service.Off(c.roundGather),
		QueueDedupWindow:   c.queueDedupWindow,
		ReadLease:          service.Off(c.readLease),
		SessionTimeout:     c.sessionTimeout,
		TransactionTimeout: c.txnTimeout,
	}
}

// watchHub returns the hub of the writer's watches, tailing the changes
// topic with the writer's Kafka connection.
func (c *config) watchHub(store *projection.Store, log *slog.Logger, reg prometheus.Registerer) (*watch.Hub, error) {
	return watch.New(watch.Config{
		Brokers:                c.kafka.BrokerList(),
		Kafka:                  c.kafka.Conn(),
		Topic:                  c.kafka.Topics().Changes,
		Partitions:             c.kafka.Topics().Partitions,
		MaxWatches:             c.maxWatches,
		MaxWatchesPerPrincipal: c.principalWatches,
		Buffer:                 c.watchBuffer,
		BufferBytes:            c.watchBufferBytes,
		MemoryBytes:            c.watchMemory,
		Stall:                  c.watchStall,
		FetchWait:              c.fetchWait,
	}, store, log, reg)
}
