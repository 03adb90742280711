// Package api is eskv's HTTP API on echo: routes, authentication, the
// error mapping and metrics. It translates HTTP to the contract (package contract)
// and the writer's requests, and nothing more: the request and answer
// types, their limits and checks are events'; the decisions are the
// writer's. Handlers are split by resource (kv, counters, locks, fields,
// scans); the custom methods {key}:{verb} dispatch through one table
// keyed by contract.Op (ops.go). Nothing below api knows HTTP.
package api

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/internal/admission"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/writer"
)

// Writer decides writes and reads the current state of keys.
type Writer interface {
	Do(ctx context.Context, c decide.Command) (writer.Result, error)
	// DoWait is Do of a pop or an acquire that may wait up to wait for
	// an item or the lock (writer.Writer.DoWait).
	DoWait(ctx context.Context, c decide.Command, wait time.Duration) (writer.Result, error)
	State(ctx context.Context, key contract.Key) (keystate.State, error)
	// States is State of several keys of one partition this writer owns,
	// confirmed once for all of them (a batch get's keys of one
	// partition), in the order of keys.
	// The states are as of the position returned (as StateAt's).
	States(ctx context.Context, keys []contract.Key) ([]keystate.State, contract.Cursor, error)
	// Partition is the partition of key, which States groups keys by.
	Partition(key contract.Key) int32
	// StateAt is State and the position of the key's partition the
	// state reflects (writer.Writer.StateAt).
	StateAt(ctx context.Context, key contract.Key) (keystate.State, contract.Cursor, error)
	Ready() bool
	// AwaitProjected returns once the projection holds every write under
	// prefix acknowledged before the call; only the owner of prefix's
	// partition answers (partition_unavailable otherwise, or when the
	// projector is too far behind). It says where the projection is then
	// read (readProjected).
	AwaitProjected(ctx context.Context, prefix string) (writer.Projected, error)
	// AwaitPosition returns once the projection holds every event under
	// prefix up to the position at of its partition, refusing (invalid,
	// field at) a position of another partition or past the log's end;
	// only the owner of prefix's partition answers, as AwaitProjected.
	AwaitPosition(ctx context.Context, prefix string, at contract.Cursor) error
	// Route says whether key is decided here or by the writer at ownerURL,
	// or why neither can answer; from is who sent the request, as its
	// forwarding proofs prove it (writer.FromClient without any).
	Route(key contract.Key, from writer.Origin) (local bool, ownerURL string, err error)
	// ForwardLoops lists the partitions whose forwarding comes back to
	// this writer by the ownership table; while any does, /readyz answers
	// 503 forward_loop. Nothing a request carries adds to it.
	ForwardLoops() []int32
	// AuditDenied records in the audit trail (kv.conflicts, reason
	// forbidden) that principal was refused the write op of key. It never
	// blocks: the record may be dropped (and counted).
	AuditDenied(key contract.Key, op contract.Op, principal, requestID string)
	// Member returns the state of the set key and the version of
	// member's element row (0: none), as the key's owner knows them.
	Member(ctx context.Context, key contract.Key, member string) (keystate.State, int64, error)
}

// Lister lists live entries by prefix from the projection: a page of at
// most pg.Limit entries and no more than fit in pg.MaxBytes (but at least one),
// and whether more follow. The server calls it after Writer.AwaitProjected,
// so one query of it sees every acknowledged write.
type Lister interface {
	List(ctx context.Context, prefix string, pg projection.Page) ([]contract.Entry, bool, error)
	// Keys lists like List the keys with their version, purpose and
	// expiry, without reading their values.
	Keys(ctx context.Context, prefix string, pg projection.Page) ([]contract.KeyInfo, bool, error)
	// Projects counts the live keys of each project that has any in the
	// key range r: at most limit projects, in key order.
	Projects(ctx context.Context, r projection.KeyRange, limit int, now time.Time) ([]contract.ProjectInfo, error)
	// Scan lists like List, keeping only the entries whose value matches
	// a filter on one top-level field, and answers the key the next page
	// starts after ("" after the last): a scan of a field without a ready
	// index may end a page short, or empty, at the last entry it read
	// (projection.Store.Scan).
	Scan(ctx context.Context, prefix string, f projection.Filter, pg projection.Page) (items []contract.Entry, next string, err error)
	// Members returns a page of the set key's members after cursor, and
	// the next page's cursor ("" after the last).
	Members(ctx context.Context, key, cursor string, limit int, now time.Time) ([]string, string, error)
	// Range returns the values of the list key from index start to stop
	// (Redis indexes), at most limit and within maxBytes (but at least
	// one), and whether more were in range.
	Range(ctx context.Context, key string, start, stop int64, pg projection.Page) ([]json.RawMessage, bool, error)
	// History returns the key's versions from version from on, oldest
	// first (at most limit, within maxBytes but at least one), and the
	// version the next page starts at (0 after the last).
	History(ctx context.Context, key string, from int64, limit, maxBytes int) ([]contract.HistoryVersion, int64, error)
	// Peek returns the next count ready items of the queue key in
	// serving order (contract.Element: member, data, deliveries), within
	// maxBytes (but at least one), and whether the budget cut them short.
	Peek(ctx context.Context, key string, count, maxBytes int, now time.Time) ([]contract.Element, bool, error)
	// OffsetAtTime, EntryAsOf and PageAsOf read the past (projection.AsOf): the
	// offset a time resolves to in a partition, a key's entry at a point
	// (nil: absent), a page of the entries under a prefix at a point
	// (filtered as Scan when f is set); cursor_expired (snapshot_expired
	// for AsOf.Snapshot) when the history retention removed what decides.
	OffsetAtTime(ctx context.Context, partition int32, t time.Time) (int64, error)
	EntryAsOf(ctx context.Context, key string, at projection.AsOf) (*contract.Entry, error)
	PageAsOf(ctx context.Context, prefix string, f *projection.Filter, at projection.AsOf, pg projection.Page) ([]contract.Entry, bool, error)
	// FieldIndexes returns the fields the projection indexes for scope
	// (a project), ready or building, as it applied its declaration.
	FieldIndexes(ctx context.Context, scope string) ([]projection.FieldIndex, error)
}

// Defaults of Config.
const (
	// DefaultMaxListBytes is the byte budget of one page of a listing.
	DefaultMaxListBytes = 4 << 20
	// DefaultMaxConcurrentLists is how many listings one server answers
	// at a time.
	DefaultMaxConcurrentLists = 16
)

// Config configures the server.
type Config struct {
	MaxValueBytes int
	Tokens        *Tokens
	// Gatherer serves /metrics (nil: no /metrics here); Registerer
	// takes the HTTP metrics. With MetricsToken, /metrics answers only
	// requests bearing it (Authorization: Bearer <MetricsToken>), 401
	// others.
	Gatherer     prometheus.Gatherer
	Registerer   prometheus.Registerer
	MetricsToken string
	// Ready is an extra readiness check (for example a database probe);
	// /readyz gives it ReadyTimeout.
	Ready func(ctx context.Context) error
	// RequestTimeout bounds every request but watches (their streams
	// last as long as their clients listen): once it passes, a write
	// the writer was handed answers 503 outcome_unknown, anything else
	// 503 partition_unavailable, both with Retry-After (deadline.go).
	// DefaultRequestTimeout when 0; negative: no bound.
	RequestTimeout time.Duration
	// InstanceID names this writer in forwarded requests when
	// AdvertiseURL is empty.
	InstanceID string
	// AdvertiseURL is the URL other writers forward to this writer at
	// (writer.Config.AdvertiseURL): the sender its forwarding proofs name
	// (ForwardedHeader), so that its own forward coming back is seen.
	AdvertiseURL string
	// PeerSecret is the secret the writers of a deployment share (at
	// least MinPeerSecretBytes) to prove to each other the requests they
	// forward (ForwardedHeader). nil draws a random key for this process
	// alone: it then recognizes its own forwards coming back, and takes
	// every other writer's forward for a client's request.
	PeerSecret []byte
	// ForwardTLS is how this writer reaches the writers it forwards to
	// when their advertise URLs are https:// (their CA as RootCAs); nil:
	// the system's roots.
	ForwardTLS *tls.Config
	// CORSAllowedOrigins are the origins (scheme://host[:port], exactly)
	// of the browser pages allowed to call /v1 (cors.go); none: no CORS
	// headers, browsers refuse other origins' calls.
	CORSAllowedOrigins []string
	// MaxListBytes bounds the bytes of the entries of one page of a
	// listing (about their JSON), beside its limit: a page that reaches
	// it is answered truncated, with a cursor, and always holds at least
	// one entry. DefaultMaxListBytes when 0.
	MaxListBytes int
	// MaxConcurrentLists bounds the reads of pages of the projection
	// answered at once (listings, scans, histories, set members, list
	// ranges, queue peeks and the status page's), from the query to the
	// last byte of the answer, so that clients that do not read their
	// answers cannot hold more than this many pages in memory; and
	// MaxListsPerPrincipal each principal's share of them, so that no
	// principal can hold them all. Beyond either a read is answered 429
	// too_many_requests with Retry-After. DefaultMaxConcurrentLists and
	// DefaultMaxListsPerPrincipal when 0.
	MaxConcurrentLists   int
	MaxListsPerPrincipal int
	// MaxWaiters bounds the requests waiting (wait=) at once, and
	// MaxWaitersPerPrincipal each principal's share of them (waits.go);
	// beyond either a waiting request is answered 429 at once.
	// DefaultMaxWaiters and DefaultMaxWaitersPerPrincipal when 0.
	MaxWaiters             int
	MaxWaitersPerPrincipal int
	// MaxBodyBytes bounds the bytes of request bodies in memory at once,
	// from the first byte read (or, with a declared length, before it)
	// until the request is answered; MaxBodyBytesPerPrincipal each
	// principal's share (a remote address's before authentication).
	// Beyond either a request is answered 429 before its body is read.
	// The share must hold the largest body accepted (LargestBody + 1).
	// When 0: DefaultMaxBodyBytesPerPrincipal (LargestBody + 1 when
	// MaxValueBytes makes that larger, MaxBodyBytes when that is
	// smaller); DefaultMaxBodyBytes, or 4 shares when that is larger.
	MaxBodyBytes             int64
	MaxBodyBytesPerPrincipal int64
	// Watch serves GET /v1/watch; nil answers it 404.
	Watch Watcher
	// WatchHeartbeat is how often an idle watch sends a comment
	// (DefaultWatchHeartbeat when 0).
	WatchHeartbeat time.Duration
	// UIKey is the status page's secret (at least MinUIKeyBytes): it
	// signs session cookies and keys the fingerprints of values. Writers
	// of one deployment share it, so that a session works on any of them
	// and a value has one fingerprint; nil draws a random key for this
	// process alone.
	UIKey []byte
	// UISessionTTL is how long a status page session lasts
	// (DefaultUISessionTTL when 0).
	UISessionTTL time.Duration
	// Build is the server's build, which GET /version answers to any
	// authenticated caller.
	Build contract.BuildInfo
	// UILogouts records the status page's logouts for every writer that
	// shares UIKey; nil keeps them in this process only (a logged-out
	// session is then refused by this writer alone).
	UILogouts UILogouts
	// AuditorGroup is the auditor's consumer group, whose committed
	// offsets the status page's health view shows as its position
	// (DefaultAuditorGroup when empty).
	AuditorGroup string
	// AuditorURL is the base URL of the auditor's health server, whose
	// GET /verification (the last periodic verification) the health view
	// shows, asked within 1 s; empty: "auditor not configured".
	// AuditorToken is the bearer token it requires (the auditor's
	// metrics token), if any.
	AuditorURL   string
	AuditorToken string
}

// Server is the HTTP API.
type Server struct {
	cfg  Config
	w    Writer
	list Lister
	log  *slog.Logger
	echo *echo.Echo
	now  func() time.Time
	fwd  *forwarder
	// denials logs and counts refused requests.
	denials *denials
	// limits are the shared slots and their shares (limits.go).
	limits limits
	// ui authenticates the status page's sessions, uiLogouts says which
	// a logout ended; conflicts counts the 409 answers it charts.
	ui        *uiAuth
	uiLogouts UILogouts
	conflicts *conflictCounter
	// metrics observes every request (nil without Config.Registerer).
	metrics *requestMetrics
	// contexts holds the reqContexts of serve for reuse.
	contexts sync.Pool
	// auditor asks the auditor's GET /verification.
	auditor *http.Client
}

// New returns the API server around w and list.
func New(cfg Config, w Writer, list Lister, log *slog.Logger) (*Server, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, w: w, list: list, log: log, now: time.Now, auditor: &http.Client{Timeout: uiAuditorTimeout}}
	var err error
	if s.fwd, err = newForwarder(cmp.Or(cfg.AdvertiseURL, cfg.InstanceID, "writer"), cfg.PeerSecret, cfg.ForwardTLS); err != nil {
		return nil, err
	}
	refusals, err := admission.Refusals(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	s.limits = newLimits(&cfg, refusals)
	if s.ui, err = newUIAuth(cfg.UIKey, cfg.Tokens, cfg.UISessionTTL); err != nil {
		return nil, err
	}
	s.uiLogouts = cfg.UILogouts
	if s.uiLogouts == nil {
		s.uiLogouts = &memLogouts{ended: make(map[[32]byte]time.Time)}
	}
	s.conflicts = newConflictCounter()
	s.contexts.New = func() any { return new(reqContext) }
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	e.JSONSerializer = jsonSerializer{}
	if s.denials, err = newDenials(cfg.Tokens, cfg.Registerer, log); err != nil {
		return nil, err
	}
	routes := map[string]bool{} // filled below, before any request
	if cfg.Registerer != nil {
		if s.metrics, err = newRequestMetrics(cfg.Registerer, routes); err != nil {
			return nil, err
		}
		if err := cfg.Registerer.Register(s.readyGauge()); err != nil {
			return nil, err
		}
	}
	if m := cors(cfg.CORSAllowedOrigins); m != nil {
		e.Pre(m) // before routing: a preflight reaches no route, no authentication
	}
	e.Use(s.serve)
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	// The version and revision name the flaws a server has, so only a
	// caller holding a valid token (any grant) reads them; an anonymous
	// client gets 401 as from /v1.
	e.GET("/version", s.authenticate(func(c echo.Context) error { return c.JSON(http.StatusOK, cfg.Build) }))
	if cfg.Gatherer != nil {
		e.GET("/metrics", metricsEndpoint(cfg.Gatherer, cfg.MetricsToken))
	}
	s.routeUI(e)
	s.routeV1(e)
	for _, r := range e.Routes() {
		routes[r.Path] = true
	}
	s.echo = e
	return s, nil
}

// defaults fills cfg's unset sizes and durations and checks the rest.
func (cfg *Config) defaults() error {
	if cfg.MaxValueBytes == 0 {
		cfg.MaxValueBytes = contract.DefaultMaxValueBytes
	}
	if cfg.MaxListBytes == 0 {
		cfg.MaxListBytes = DefaultMaxListBytes
	}
	if cfg.WatchHeartbeat == 0 {
		cfg.WatchHeartbeat = DefaultWatchHeartbeat
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.Tokens == nil {
		return errors.New("api: a token table is required")
	}
	if err := cfg.limitDefaults(); err != nil {
		return err
	}
	if err := CheckCORSOrigins(cfg.CORSAllowedOrigins); err != nil {
		return fmt.Errorf("api: CORSAllowedOrigins: %w", err)
	}
	return checkAuditorURL(cfg.AuditorURL)
}

// routeV1 registers the /v1 routes.
func (s *Server) routeV1(e *echo.Echo) {
	// The group's middlewares serve the paths under /v1 no route matches
	// (echo registers a not-found route for them): those answer 401
	// without a valid token, 404 with one. The routes themselves are
	// registered with the middlewares applied once (v1), not by the group:
	// echo applies a group's middlewares again on every request, a closure
	// allocated per layer.
	e.Group("/v1", s.authenticate, s.countConflicts)
	e.GET("/v1/kv", s.v1(s.listKeys))
	e.POST(batchGetRoute, s.v1(s.batchGet))
	e.POST(deleteRangeRoute, s.v1(s.deleteRange))
	e.POST(expireDueRoute, s.v1(s.expireDue))
	e.GET("/v1/projects", s.v1(s.projects))
	e.GET("/v1/kv/*", s.v1(s.get))
	e.PUT("/v1/kv/*", s.v1(s.writeHandler(s.put)))
	e.DELETE("/v1/kv/*", s.v1(s.writeHandler(s.delete)))
	e.POST("/v1/kv/*", s.v1(s.post))
	e.PATCH("/v1/kv/*", s.v1(s.writeHandler(s.patch)))
	e.POST("/v1/txn", s.v1(s.txn))
	e.GET("/v1/watch", s.v1(s.watchStream))
}

// v1 is h behind the middlewares of every /v1 route.
func (s *Server) v1(h echo.HandlerFunc) echo.HandlerFunc {
	return s.authenticate(s.countConflicts(h))
}

// Handler returns the server's http.Handler: its echo.
func (s *Server) Handler() http.Handler { return s.echo }

// ServeHTTP serves a request through the server's echo.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.echo.ServeHTTP(w, r) }

// serve is the server's one global middleware (e.Use), run for every
// request once echo routed it, whether a route matched or not: it bounds
// the request by its deadline, hands the handler a pooled reqContext
// (the principal, the body's charge, the forwarding proofs) instead of
// echo's map, answers the handler's error itself (so that the metrics
// see the answer's status) and observes the request. Its parts are
// inline, one layer: echo composes its middlewares anew on every
// request, a closure allocated per layer.
func (s *Server) serve(next echo.HandlerFunc) echo.HandlerFunc {
	return func(ec echo.Context) error {
		r := ec.Request()
		release := s.withDeadline(ec)
		c := s.contexts.Get().(*reqContext)
		c.Context, c.bodies = ec, s.limits.bodies
		// Forwarding proofs are read here, and the header removed,
		// before any handler: what a client wrote there reaches nothing.
		if vs, ok := r.Header[ForwardedHeader]; ok {
			delete(r.Header, ForwardedHeader)
			c.from, c.carry = s.fwd.verify(vs, r.Method, r.URL.RequestURI(), s.now())
		}
		var start time.Time
		if s.metrics != nil {
			start = time.Now()
		}
		if err := next(c); err != nil {
			if answer := pastDeadline(ec.Request(), err); answer != err {
				s.log.Warn("request deadline passed", "method", r.Method, "path", r.URL.Path, "err", err)
				err = answer
			}
			s.logCause(c, err)
			s.echo.HTTPErrorHandler(err, c)
		}
		release()
		c.releaseBody()
		if s.metrics != nil {
			s.metrics.observe(c, start)
		}
		*c = reqContext{}
		s.contexts.Put(c)
		return nil
	}
}

// ReadyTimeout bounds Config.Ready's check, so that /readyz answers
// within 2 s however the database does.
const ReadyTimeout = 1500 * time.Millisecond

// readyz answers whether the writer serves: it depends on the writer's
// own state (its brokers answering among it), the ownership table and the
// database, never on what any request carried.
func (s *Server) readyz(c echo.Context) error {
	if err, cause := s.readiness(c.Request().Context()); err != nil {
		if cause != nil {
			// The cause names hosts, users and databases: logs only.
			s.log.Warn("not ready", "err", cause)
		}
		return err
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// readiness is /readyz's check: nil when the writer serves, else the
// answer, and the dependency's error behind it to log, if any.
func (s *Server) readiness(ctx context.Context) (answer *contract.Error, cause error) {
	if loops := s.w.ForwardLoops(); len(loops) > 0 {
		return &contract.Error{Code: contract.EForwardLoop, RetryAfterSeconds: 1, Message: fmt.Sprintf(
			"forwarding loops back to this writer for partitions %v: a writer's ESKV_ADVERTISE_URL is wrong (see the log)", loops)}, nil
	}
	if !s.w.Ready() {
		return &contract.Error{Code: contract.EUnavailable, Message: "writer is joining the group, catching up, or its brokers do not answer", RetryAfterSeconds: 1}, nil
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(ctx, ReadyTimeout)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			return &contract.Error{Code: contract.EUnavailable, Message: "a dependency (the projection database) is not ready", RetryAfterSeconds: 1}, err
		}
	}
	return nil, nil
}

// readyGauge is eskv_writer_ready: /readyz's answer as a metric, checked
// at each scrape, so that storage out of reach (brokers not answering,
// the projection database not answering) pages even while no request
// arrives and the pod, not ready, is out of its Service.
func (s *Server) readyGauge() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "eskv_writer_ready",
		Help: "1 when the writer is ready (what /readyz answers, checked at each scrape: joined and caught up, its brokers answering, the projection database answering, no forward loop), else 0.",
	}, func() float64 {
		if err, _ := s.readiness(context.Background()); err != nil {
			return 0
		}
		return 1
	})
}

// logCause logs the cause an error answer does not tell: a 503 whose
// *contract.Error wraps a driver error (projection's translate) answers a
// stable message; the driver's text, which names hosts, users and
// databases, goes to the log. Internal errors are logged by the error
// handler.
func (s *Server) logCause(c echo.Context, err error) {
	if e, ok := errors.AsType[*contract.Error](err); ok && e.Code == contract.EUnavailable && error(e) != err {
		s.log.Warn("unavailable", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
}

// principalKey holds the principal in a context that is not a
// reqContext (one made outside serve).
const principalKey = "principal"

// reqContext is the echo.Context of a request served by serve, with
// the principal its credentials named (authenticate, the status page's
// session). echo's own store (Set, Get) makes a map per request and
// takes a lock at each access; a request reads its principal several
// times (authorization, the answer, the error handler).
type reqContext struct {
	echo.Context
	principal *Principal
	// bodies is the gate of request body bytes; charged, what the
	// request's body took of it, for chargedTo (chargeBody).
	bodies    *admission.Gate
	charged   int64
	chargedTo admission.Holder
	// from is who sent the request, as its forwarding proofs prove it;
	// carry holds the proofs to pass on if it is forwarded (forwarder).
	from  writer.Origin
	carry string
}

// originOf is who sent the request and the forwarding proofs to carry
// on (writer.FromClient and none outside serve).
func originOf(c echo.Context) (writer.Origin, string) {
	if rc, ok := c.(*reqContext); ok {
		return rc.from, rc.carry
	}
	return writer.FromClient, ""
}

// principalOf is the request's principal: nil before authentication.
func principalOf(c echo.Context) *Principal {
	if rc, ok := c.(*reqContext); ok {
		return rc.principal
	}
	p, _ := c.Get(principalKey).(*Principal)
	return p
}

// setPrincipal records the request's principal.
func setPrincipal(c echo.Context, p *Principal) {
	if rc, ok := c.(*reqContext); ok {
		rc.principal = p
		return
	}
	c.Set(principalKey, p)
}

// authenticate runs before any handler reads the body. A refused request
// is answered at once: when it declared a body, the connection is closed
// after the answer and the unread body is not waited for. Every refusal
// (here or a handler's forbidden) is logged and counted by denials.
func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, aerr := s.cfg.Tokens.authenticate(c.Request().Header, s.now())
		if aerr != nil {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="eskv"`)
			s.deny(c, aerr.principal, aerr.reason, aerr.err)
			return aerr.err
		}
		setPrincipal(c, p)
		err := next(c)
		if contract.ErrorCode(err) == contract.EForbidden {
			s.deny(c, p, reasonForbidden, err)
		}
		return err
	}
}

// deny records a refused request and, when it declared a body, stops
// reading it: the answer goes out with Connection: close and the server
// does not wait for the rest of the body.
func (s *Server) deny(c echo.Context, p *Principal, reason string, err error) {
	r := c.Request()
	d := denial{principal: UnknownPrincipal, reason: reason, method: r.Method, key: c.Param("*"),
		remote: r.RemoteAddr, message: err.Error(), status: statusOf[contract.ErrorCode(err)]}
	if p != nil {
		d.principal = p.Name
	}
	if d.key == "" {
		d.key = r.URL.Query().Get("prefix")
	}
	if t, ok := c.Get(txnDeniedKey).(txnDenied); ok {
		d.key = t.key
	}
	if s.denials.record(d, s.now()) && reason == reasonForbidden && p != nil {
		s.auditDenied(c, p)
	}
	skipBody(c)
}

// authorizeKey parses raw as a key and checks the caller's right on it.
func (s *Server) authorizeKey(c echo.Context, r Right, raw string) (*Principal, contract.Key, error) {
	p := principalOf(c)
	k, err := contract.ParseKey(raw)
	if err != nil {
		return nil, contract.Key{}, err
	}
	if !p.Allows(r, k.String()) {
		return nil, contract.Key{}, contract.FieldErrorf(contract.EForbidden, "key", "principal %s may not %s %s", p.Name, r, k.String())
	}
	return p, k, nil
}
