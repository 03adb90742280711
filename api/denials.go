package api

import (
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/contract"
)

// Denial log budget per principal: a burst, then one line per interval;
// the lines skipped meanwhile are counted in the next one.
const (
	denialLogBurst    = 10
	denialLogInterval = time.Second
	// maxLoggedKey bounds the key or path a denial line carries.
	maxLoggedKey = 256
)

// denials logs and counts refused requests (401, 403 and a refused
// Authorization header). The counter is labelled by reason only: /metrics
// may be read by whoever reaches it (unless ESKV_METRICS_TOKEN or
// ESKV_METRICS_ADDR keep it apart), so it names no principal; the log
// lines do. Its limiters are bounded by the token tables: one per
// principal a table has named (a reloaded tokens file may add some) and
// one for UnknownPrincipal.
type denials struct {
	log     *slog.Logger
	counter *prometheus.CounterVec
	tokens  *Tokens
	mu      sync.Mutex
	buckets map[string]*logBucket
}

func newDenials(t *Tokens, reg prometheus.Registerer, log *slog.Logger) (*denials, error) {
	d := &denials{log: log, tokens: t, buckets: make(map[string]*logBucket),
		counter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_http_denied_total",
			Help: "Requests refused for authentication (401, or 400 for two Authorization headers) or authorization (403), by reason (the log line of each names its principal).",
		}, []string{"reason"})}
	if reg != nil {
		if err := reg.Register(d.counter); err != nil {
			return nil, err
		}
	}
	d.buckets[UnknownPrincipal] = &logBucket{tokens: denialLogBurst}
	return d, nil
}

// bucket returns the log budget of principal, created when the current
// tokens name it, and the label it is counted under (UnknownPrincipal for
// a name no table has named).
func (ds *denials) bucket(principal string) (*logBucket, string) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if b, ok := ds.buckets[principal]; ok {
		return b, principal
	}
	if !ds.tokens.knows(principal) {
		return ds.buckets[UnknownPrincipal], UnknownPrincipal
	}
	b := &logBucket{tokens: denialLogBurst}
	ds.buckets[principal] = b
	return b, principal
}

// denial is one refused request. Key is the key or listing prefix asked
// for, as sent; no value is ever part of it.
type denial struct {
	principal, reason, method, key, remote, message string
	status                                          int
}

// record counts d and logs it within its principal's budget; it reports
// whether it logged it. A denial the budget leaves unlogged is not audited
// either, so the budget also bounds the audit records of a principal.
func (ds *denials) record(d denial, now time.Time) bool {
	b, label := ds.bucket(d.principal)
	d.principal = label
	ds.counter.WithLabelValues(d.reason).Inc()
	ok, skipped := b.take(now)
	if !ok {
		return false
	}
	ds.log.Warn("request denied", "status", d.status, "reason", d.reason, "principal", d.principal,
		"method", truncate(d.method, 16), "key", truncate(d.key, maxLoggedKey), "remote", d.remote,
		"message", truncate(d.message, 2*maxLoggedKey), "suppressed", skipped)
	return true
}

// auditDenied hands a write refused to p (403) to the writer for the audit
// trail, when the request is a write and its key parses. Only what the
// request line says is recorded: the op, the key and, for a DELETE, its
// requestId; the body is never read.
func (s *Server) auditDenied(c echo.Context, p *Principal) {
	op, raw, ok := writeOp(c)
	if !ok {
		return
	}
	k, err := contract.ParseKey(raw)
	if err != nil {
		return
	}
	q := contract.DeleteParams{RequestID: c.QueryParam("requestId")}
	if q.Validate() != nil {
		q.RequestID = ""
	}
	s.w.AuditDenied(k, op, p.Name, q.RequestID)
}

// writeOp is the write op of a request to /v1/kv/{key} and its raw key,
// or false when the request is not a write (a read, a listing, an unknown
// verb). Of a transaction (POST /v1/txn) it is the first write the caller
// was refused, which the handler noted.
func writeOp(c echo.Context) (contract.Op, string, bool) {
	if d, ok := c.Get(txnDeniedKey).(txnDenied); ok {
		return d.op, d.key, d.write
	}
	if !strings.HasPrefix(c.Request().URL.Path, "/v1/kv/") {
		return "", "", false
	}
	switch c.Request().Method {
	case http.MethodPut:
		return contract.OpPut, keyPath(c), true
	case http.MethodPatch:
		return contract.OpPatch, keyPath(c), true
	case http.MethodDelete:
		return contract.OpDelete, keyPath(c), true
	case http.MethodPost:
		raw, verb := splitVerb(c)
		op, ok := opOfVerb(verb, false)
		return op, raw, ok
	}
	return "", "", false
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// logBucket is a token bucket of log lines.
type logBucket struct {
	mu      sync.Mutex
	tokens  float64
	last    time.Time
	skipped int
}

// take spends a line if one is left; on success it returns the number of
// lines skipped since the last one logged.
func (b *logBucket) take(now time.Time) (bool, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.last.IsZero() {
		b.tokens = min(denialLogBurst, b.tokens+now.Sub(b.last).Seconds()/denialLogInterval.Seconds())
	}
	b.last = now
	if b.tokens < 1 {
		b.skipped++
		return false, 0
	}
	b.tokens--
	skipped := b.skipped
	b.skipped = 0
	return true, skipped
}
