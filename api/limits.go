package api

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/admission"
	"github.com/eskv/eskv/projection"
)

// The writer's shared slots and each principal's share of them
// (internal/admission): listings in progress and request body bytes in
// memory, requests waiting (waits.go). A request is charged to its principal, or, before
// authentication, to its remote address (never a header a client
// writes). Beyond its share, or the global bound, it is answered 429
// too_many_requests with Retry-After and the setting in Field; a body
// that can never fit, 413.

// Defaults of Config's shares and bounds.
const (
	// DefaultMaxListsPerPrincipal is each principal's share of
	// MaxConcurrentLists.
	DefaultMaxListsPerPrincipal = 4
	// DefaultMaxBodyBytes bounds the bytes of request bodies in memory
	// at once, and DefaultMaxBodyBytesPerPrincipal each principal's share
	// (with the default MaxValueBytes: Config says when they grow).
	DefaultMaxBodyBytes             = 64 << 20
	DefaultMaxBodyBytesPerPrincipal = 16 << 20
)

// The settings of the bounds, as refusals name them.
const (
	SettingMaxLists                 = "ESKV_MAX_CONCURRENT_LISTS"
	SettingMaxListsPerPrincipal     = "ESKV_MAX_LISTS_PER_PRINCIPAL"
	SettingMaxBodyBytes             = "ESKV_MAX_BODY_BYTES"
	SettingMaxBodyBytesPerPrincipal = "ESKV_MAX_BODY_BYTES_PER_PRINCIPAL"
)

// limitDefaults sets the bounds left 0 to their defaults (Config says
// which), and refuses a share of body bytes that cannot hold the largest
// body.
func (cfg *Config) limitDefaults() error {
	cfg.MaxConcurrentLists = cmp.Or(cfg.MaxConcurrentLists, DefaultMaxConcurrentLists)
	cfg.MaxListsPerPrincipal = cmp.Or(cfg.MaxListsPerPrincipal, DefaultMaxListsPerPrincipal)
	cfg.MaxWaiters = cmp.Or(cfg.MaxWaiters, DefaultMaxWaiters)
	cfg.MaxWaitersPerPrincipal = cmp.Or(cfg.MaxWaitersPerPrincipal, DefaultMaxWaitersPerPrincipal)
	need := int64(LargestBody(cfg.MaxValueBytes)) + 1
	if cfg.MaxBodyBytesPerPrincipal == 0 {
		cfg.MaxBodyBytesPerPrincipal = max(DefaultMaxBodyBytesPerPrincipal, need)
		if cfg.MaxBodyBytes > 0 {
			cfg.MaxBodyBytesPerPrincipal = min(cfg.MaxBodyBytesPerPrincipal, cfg.MaxBodyBytes)
		}
	}
	cfg.MaxBodyBytes = cmp.Or(cfg.MaxBodyBytes, max(DefaultMaxBodyBytes, 4*cfg.MaxBodyBytesPerPrincipal))
	if cfg.MaxBodyBytesPerPrincipal < need || cfg.MaxBodyBytes < cfg.MaxBodyBytesPerPrincipal {
		return fmt.Errorf("api: %s must be at least the largest request body accepted + 1 (%d bytes) and at most %s",
			SettingMaxBodyBytesPerPrincipal, need, SettingMaxBodyBytes)
	}
	return nil
}

// limits are the server's gates.
type limits struct {
	lists, bodies, waiters *admission.Gate
}

func newLimits(cfg *Config, refusals *prometheus.CounterVec) limits {
	return limits{
		lists: admission.New(admission.Limit{Total: int64(cfg.MaxConcurrentLists), Each: int64(cfg.MaxListsPerPrincipal),
			TotalSetting: SettingMaxLists, EachSetting: SettingMaxListsPerPrincipal}, refusals),
		bodies: admission.New(admission.Limit{Total: cfg.MaxBodyBytes, Each: cfg.MaxBodyBytesPerPrincipal,
			TotalSetting: SettingMaxBodyBytes, EachSetting: SettingMaxBodyBytesPerPrincipal}, refusals),
		waiters: admission.New(admission.Limit{Total: int64(cfg.MaxWaiters), Each: int64(cfg.MaxWaitersPerPrincipal),
			TotalSetting: SettingMaxWaiters, EachSetting: SettingMaxWaitersPerPrincipal}, refusals),
	}
}

// holderOf is who a request is charged to: its principal, else its
// remote address.
func holderOf(c echo.Context) admission.Holder {
	if p := principalOf(c); p != nil {
		return admission.Holder{Name: p.Name}
	}
	return admission.Holder{Name: remoteIP(c.Request()), Addr: true}
}

// remoteIP is the IP address of r's peer (the whole RemoteAddr when it
// has no port).
func remoteIP(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// takeList takes one of the listings' slots for c's principal (a page of
// the projection is in memory until its answer is written) and returns
// its release, or 429 when the principal's share or every slot is taken.
// From then on c's request context names the principal as the reader of
// its snapshots of the projection, whose connections are shared fairly
// among readers (projection.WithReader): a handler that took the
// context before reads it again.
func (s *Server) takeList(c echo.Context) (func(), error) {
	h := holderOf(c)
	if err := s.limits.lists.Take(h, 1); err != nil {
		return nil, refusal(err, "reads of pages (listings, scans, histories, collections) in progress")
	}
	r := c.Request()
	c.SetRequest(r.WithContext(projection.WithReader(r.Context(), h.Name)))
	return func() { s.limits.lists.Release(h, 1) }, nil
}

// chargeBody takes n bytes of request bodies for c's request, released
// when its answer is written (Server.serve). A refused request is answered
// without reading the rest of its body.
func chargeBody(c echo.Context, n int) error {
	rc, ok := c.(*reqContext)
	if !ok || rc.bodies == nil {
		return nil // a context made outside Server.serve: nothing releases it
	}
	if rc.charged == 0 {
		rc.chargedTo = holderOf(c)
	}
	if err := rc.bodies.Take(rc.chargedTo, int64(n)); err != nil {
		skipBody(c)
		return refusal(err, "request bodies in memory")
	}
	rc.charged += int64(n)
	return nil
}

// releaseBody gives back what c's request body was charged.
func (c *reqContext) releaseBody() {
	if c.charged > 0 {
		c.bodies.Release(c.chargedTo, c.charged)
	}
}

// refusal is the answer to err, a gate's refusal of what: 413 when it
// can never fit, else 429 with Retry-After; Field names the setting.
func refusal(err error, what string) error {
	r, ok := errors.AsType[*admission.Refused](err)
	if !ok {
		return err
	}
	if r.Never {
		return contract.FieldErrorf(contract.ETooLarge, r.Setting, "the request needs more than %s allows", r.Setting)
	}
	whose := "this caller's" // its principal's, or its remote address's before authentication
	if r.Setting == SettingMaxLists || r.Setting == SettingMaxBodyBytes || r.Setting == SettingMaxWaiters {
		whose = "this writer's"
	}
	return &contract.Error{Code: contract.ETooManyRequests, Field: r.Setting, RetryAfterSeconds: 1,
		Message: fmt.Sprintf("%s %s are at %s; retry", whose, what, r.Setting)}
}
