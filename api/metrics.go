package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eskv/eskv/contract"
)

// otherLabel is the metric label of every request method and route the
// API does not know: labels come from a fixed set, so no client can grow
// /metrics by sending made-up methods or paths.
const otherLabel = "other"

// knownMethods are the request methods labelled as themselves.
var knownMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPut: true, http.MethodPost: true,
	http.MethodDelete: true, http.MethodPatch: true, http.MethodOptions: true,
}

// methodLabel is m when it is a known method, else otherLabel.
func methodLabel(m string) string {
	if knownMethods[m] {
		return m
	}
	return otherLabel
}

// requestMetrics observes each request's latency by route, method,
// status and op (opLabel: the verb of a key op). routes are the
// registered route paths (c.Path()); any other path (no route matched) is
// labelled otherLabel. routes must be complete before the first request.
// Server.serve calls observe after the request's answer, error
// answers included.
type requestMetrics struct {
	routes map[string]bool
	obs    observers
}

func newRequestMetrics(reg prometheus.Registerer, routes map[string]bool) (*requestMetrics, error) {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "eskv_http_request_seconds",
		Help:    "HTTP request latency by route, method, status and op (get, put, sadd, qpop, txn, list, watch, ...; none outside the API); unknown routes, methods and verbs are labelled other.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	}, []string{"route", "method", "status", "op"})
	if err := reg.Register(h); err != nil {
		return nil, err
	}
	return &requestMetrics{routes: routes, obs: observers{vec: h}}, nil
}

// observe records the request of c, started at start.
func (m *requestMetrics) observe(c echo.Context, start time.Time) {
	route := c.Path()
	if !m.routes[route] {
		route = otherLabel
	}
	method := methodLabel(c.Request().Method)
	m.obs.get(route, method, c.Response().Status, opLabel(route, method, c.Request().URL.Path)).Observe(time.Since(start).Seconds())
}

// seriesKey names one series of the request histogram.
type seriesKey struct {
	route, method, op string
	status            int
}

// observers resolves each series' observer once: WithLabelValues hashes
// the four labels and formats the status on every request, and the set
// of series is small and bounded (known routes and methods, HTTP
// statuses, ops from the op table).
type observers struct {
	vec *prometheus.HistogramVec
	m   sync.Map // seriesKey → prometheus.Observer
}

func (o *observers) get(route, method string, status int, op string) prometheus.Observer {
	k := seriesKey{route, method, op, status}
	if v, ok := o.m.Load(k); ok {
		return v.(prometheus.Observer)
	}
	v, _ := o.m.LoadOrStore(k, o.vec.WithLabelValues(route, method, strconv.Itoa(status), op))
	return v.(prometheus.Observer)
}

// metricsEndpoint serves g's metrics (GET /metrics); with a token, only to
// requests bearing it (Authorization: Bearer <token>; 401 otherwise). It
// is not one of the API's tokens: a scraper needs no grant, and an API
// token does not open /metrics.
func metricsEndpoint(g prometheus.Gatherer, token string) echo.HandlerFunc {
	h := echo.WrapHandler(promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	if token == "" {
		return h
	}
	want := sha256.Sum256([]byte(token))
	return func(c echo.Context) error {
		got := sha256.Sum256([]byte(bearerToken(c.Request().Header.Get("Authorization"))))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="eskv-metrics"`)
			return contract.FieldErrorf(contract.EUnauthenticated, "Authorization", "/metrics needs the metrics token (ESKV_METRICS_TOKEN) as a bearer token")
		}
		return h(c)
	}
}

// bearerToken is the token of an Authorization header value "Bearer
// <token>" (the scheme in any case), or "".
func bearerToken(v string) string {
	scheme, tok, _ := strings.Cut(strings.TrimSpace(v), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimLeft(tok, " ")
}
