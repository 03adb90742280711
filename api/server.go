// Package api is eskv's HTTP API on echo: handlers, authentication, the
// error mapping and metrics. It knows HTTP; nothing below it does.
package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/writer"
)

// Writer decides writes and reads the current state of keys.
type Writer interface {
	Do(ctx context.Context, r *writer.Request) (writer.Result, error)
	State(ctx context.Context, key events.Key) (events.State, error)
	Ready() bool
	// Route says whether key is decided here or by the writer at ownerURL.
	Route(key events.Key) (local bool, ownerURL string)
}

// Lister lists live entries by prefix from the projection.
type Lister interface {
	List(ctx context.Context, prefix, after string, limit int, now time.Time) ([]events.Entry, bool, error)
	// Scan lists like List, keeping only the entries whose value matches
	// a filter on one top-level field.
	Scan(ctx context.Context, prefix string, f projection.Filter, after string, limit int, now time.Time) ([]events.Entry, bool, error)
}

// Limits on request fields.
const (
	MaxTTLSeconds   = 10 * 365 * 24 * 3600
	MaxListLimit    = 1000
	DefaultLimit    = 100
	maxRequestID    = 128
	maxSpecRef      = 512
	maxProducer     = 128
	maxHints        = 32
	maxHintLen      = 128
	bodyOverheadMax = 16 << 10
)

// Config configures the server.
type Config struct {
	MaxValueBytes int
	Tokens        *Tokens
	// Gatherer serves /metrics; Registerer takes the HTTP metrics.
	Gatherer   prometheus.Gatherer
	Registerer prometheus.Registerer
	// Ready is an extra readiness check (for example a database ping).
	Ready func(ctx context.Context) error
	// InstanceID names this writer in forwarded requests.
	InstanceID string
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
}

// New returns the API server around w and list.
func New(cfg Config, w Writer, list Lister, log *slog.Logger) (*Server, error) {
	if cfg.MaxValueBytes == 0 {
		cfg.MaxValueBytes = events.DefaultMaxValueBytes
	}
	if cfg.Tokens == nil {
		return nil, errors.New("api: a token table is required")
	}
	s := &Server{cfg: cfg, w: w, list: list, log: log, now: time.Now,
		fwd: &forwarder{self: cfg.InstanceID, proxies: make(map[string]*httputil.ReverseProxy)}}
	if s.fwd.self == "" {
		s.fwd.self = "writer"
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	e.JSONSerializer = jsonSerializer{}
	if cfg.Registerer != nil {
		mw, err := metricsMiddleware(cfg.Registerer)
		if err != nil {
			return nil, err
		}
		e.Use(mw)
	}
	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	if cfg.Gatherer != nil {
		e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{})))
	}
	v1 := e.Group("/v1", s.authenticate)
	v1.GET("/kv", s.listKeys)
	v1.GET("/kv/*", s.get)
	v1.PUT("/kv/*", s.put)
	v1.DELETE("/kv/*", s.delete)
	v1.POST("/kv/*", s.post)
	v1.PATCH("/kv/*", s.patch)
	s.echo = e
	return s, nil
}

// Handler returns the server's http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

func (s *Server) readyz(c echo.Context) error {
	if !s.w.Ready() {
		return &events.Error{Code: events.EUnavailable, Message: "writer is joining the group or catching up", RetryAfterSeconds: 1}
	}
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			return &events.Error{Code: events.EUnavailable, Message: "dependency not ready: " + err.Error(), RetryAfterSeconds: 1}
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

const principalKey = "principal"

func (s *Server) authenticate(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, err := s.cfg.Tokens.authenticate(c.Request().Header.Get("Authorization"))
		if err != nil {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="eskv"`)
			return err
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// authorize parses the key in the path and checks the caller's right on it.
func (s *Server) authorize(c echo.Context, r Right) (*Principal, events.Key, error) {
	raw, err := url.PathUnescape(c.Param("*"))
	if err != nil {
		return nil, events.Key{}, events.FieldErrorf(events.EInvalid, "key", "key is not a valid URL path: %v", err)
	}
	return s.authorizeKey(c, r, raw)
}

// authorizeKey parses raw as a key and checks the caller's right on it.
func (s *Server) authorizeKey(c echo.Context, r Right, raw string) (*Principal, events.Key, error) {
	p := c.Get(principalKey).(*Principal)
	k, err := events.ParseKey(raw)
	if err != nil {
		return nil, events.Key{}, err
	}
	if !p.Allows(r, k.String()) {
		return nil, events.Key{}, events.FieldErrorf(events.EForbidden, "key", "principal %s may not %s %s", p.Name, r, k.String())
	}
	return p, k, nil
}

func (s *Server) get(c echo.Context) error {
	raw, verb, err := splitVerb(c)
	if err != nil {
		return err
	}
	var role writer.Role
	switch verb {
	case "":
	case "lock":
		role = writer.RoleLock
	case "leader":
		role = writer.RoleLeader
	default:
		return events.FieldErrorf(events.EInvalid, "key", "unknown verb %q (GET takes :lock or :leader)", verb)
	}
	field, hasField := "", false
	for q, v := range c.QueryParams() {
		if q != "field" || verb != "" {
			return events.FieldErrorf(events.EInvalid, q, "unknown query parameter %q (field, on a plain GET)", q)
		}
		field, hasField = v[0], true
	}
	if hasField {
		if err := checkFieldName("field", field); err != nil {
			return err
		}
	}
	_, k, err := s.authorizeKey(c, Read, raw)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	st, err := s.w.State(c.Request().Context(), k)
	if err != nil {
		return err
	}
	e := st.Visible(s.now())
	if role != "" {
		return s.checkLock(c, e, k, role)
	}
	if e == nil {
		return events.FieldErrorf(events.ENotFound, "key", "key %s does not exist", k.String())
	}
	if hasField {
		return getField(c, e, field)
	}
	return c.JSON(http.StatusOK, e)
}

// PutBody is the body of PUT /v1/kv/{key}.
type PutBody struct {
	Value           json.RawMessage   `json:"value"`
	ExpectedVersion *int64            `json:"expectedVersion,omitempty"`
	TTLSeconds      *int64            `json:"ttlSeconds,omitempty"`
	Semantics       *events.Semantics `json:"semantics,omitempty"`
	RequestID       string            `json:"requestId,omitempty"`
	SpecRef         string            `json:"specRef,omitempty"`
}

// putWire decodes PutBody with semantics kept raw, so that errors inside
// it name their full path.
type putWire struct {
	Value           json.RawMessage `json:"value"`
	ExpectedVersion *int64          `json:"expectedVersion,omitempty"`
	TTLSeconds      *int64          `json:"ttlSeconds,omitempty"`
	Semantics       json.RawMessage `json:"semantics,omitempty"`
	RequestID       string          `json:"requestId,omitempty"`
	SpecRef         string          `json:"specRef,omitempty"`
}

func (s *Server) put(c echo.Context) error {
	p, k, err := s.authorize(c, Write)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	var w putWire
	if err := s.decode(c, &w); err != nil {
		return err
	}
	b := PutBody{Value: w.Value, ExpectedVersion: w.ExpectedVersion, TTLSeconds: w.TTLSeconds, RequestID: w.RequestID, SpecRef: w.SpecRef}
	if len(w.Semantics) > 0 && string(w.Semantics) != "null" {
		b.Semantics = new(events.Semantics)
		if err := decodeStrict(w.Semantics, b.Semantics, "semantics."); err != nil {
			return err
		}
	}
	req := &writer.Request{Key: k, Op: writer.OpPut, RequestID: b.RequestID, SpecRef: b.SpecRef, Principal: p.Name, ExpectedVersion: b.ExpectedVersion}
	if req.Value, err = events.CompactValue(b.Value, s.cfg.MaxValueBytes); err != nil {
		return err
	}
	if err := checkCommon(b.ExpectedVersion, b.RequestID, b.SpecRef); err != nil {
		return err
	}
	if b.Semantics != nil {
		req.Semantics = *b.Semantics
	}
	if err := checkSemantics(&req.Semantics); err != nil {
		return err
	}
	ttl := b.TTLSeconds
	if ttl == nil && req.Semantics.TTLSeconds != 0 {
		ttl = &req.Semantics.TTLSeconds
	}
	if ttl != nil {
		if *ttl < 1 || *ttl > MaxTTLSeconds {
			return events.FieldErrorf(events.EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (omit it for no expiry)", MaxTTLSeconds)
		}
		if b.TTLSeconds != nil && req.Semantics.TTLSeconds != 0 && req.Semantics.TTLSeconds != *b.TTLSeconds {
			return events.FieldErrorf(events.EInvalid, "semantics.ttlSeconds", "semantics.ttlSeconds differs from ttlSeconds")
		}
		req.TTLSeconds = *ttl
	}
	res, err := s.w.Do(c.Request().Context(), req)
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Eskv-Replayed", "true")
	}
	return c.JSON(http.StatusOK, res.Entry)
}

// DeleteAnswer is the answer of DELETE /v1/kv/{key}.
type DeleteAnswer struct {
	Key     string `json:"key"`
	Version int64  `json:"version"`
	Deleted bool   `json:"deleted"`
}

func (s *Server) delete(c echo.Context) error {
	p, k, err := s.authorize(c, Write)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	req := &writer.Request{Key: k, Op: writer.OpDelete, Principal: p.Name, RequestID: c.QueryParam("requestId")}
	if v := c.QueryParam("expectedVersion"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return events.FieldErrorf(events.EInvalid, "expectedVersion", "expectedVersion must be an integer")
		}
		req.ExpectedVersion = &n
	}
	for q := range c.QueryParams() {
		if q != "expectedVersion" && q != "requestId" {
			return events.FieldErrorf(events.EInvalid, q, "unknown query parameter %q (expectedVersion, requestId)", q)
		}
	}
	if err := checkCommon(req.ExpectedVersion, req.RequestID, ""); err != nil {
		return err
	}
	res, err := s.w.Do(c.Request().Context(), req)
	if err != nil {
		return err
	}
	if res.Replayed {
		c.Response().Header().Set("Eskv-Replayed", "true")
	}
	return c.JSON(http.StatusOK, DeleteAnswer{Key: k.String(), Version: res.Entry.Version, Deleted: true})
}

// ListAnswer is the answer of GET /v1/kv.
type ListAnswer struct {
	Items      []events.Entry `json:"items"`
	Count      int            `json:"count"`
	Truncated  bool           `json:"truncated"`
	NextCursor string         `json:"nextCursor,omitempty"`
}

func (s *Server) listKeys(c echo.Context) error {
	p := c.Get(principalKey).(*Principal)
	q := c.QueryParams()
	for name := range q {
		if name != "prefix" && name != "limit" && name != "cursor" && !isFilterParam(name) {
			return events.FieldErrorf(events.EInvalid, name, "unknown query parameter %q (prefix, limit, cursor, field, op, value)", name)
		}
	}
	prefix := q.Get("prefix")
	if err := events.ValidatePrefix(prefix); err != nil {
		return err
	}
	if !p.Allows(Read, prefix) {
		return events.FieldErrorf(events.EForbidden, "prefix", "principal %s may not read every key under %s", p.Name, prefix)
	}
	limit := DefaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxListLimit {
			return events.FieldErrorf(events.EInvalid, "limit", "limit must be an integer between 1 and %d", MaxListLimit)
		}
		limit = n
	}
	var after string
	if v := q.Get("cursor"); v != "" {
		b, err := base64.RawURLEncoding.DecodeString(v)
		if err != nil || !bytes.HasPrefix(b, []byte(prefix)) {
			return events.FieldErrorf(events.EInvalid, "cursor", "cursor is not one this listing returned")
		}
		after = string(b)
	}
	filter, err := listFilter(q)
	if err != nil {
		return err
	}
	var items []events.Entry
	var truncated bool
	if filter != nil {
		items, truncated, err = s.scan(c.Request().Context(), prefix, *filter, after, limit)
	} else {
		items, truncated, err = s.list.List(c.Request().Context(), prefix, after, limit, s.now())
	}
	if err != nil {
		return err
	}
	a := ListAnswer{Items: items, Count: len(items), Truncated: truncated}
	if a.Items == nil {
		a.Items = []events.Entry{}
	}
	if truncated && len(items) > 0 {
		a.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(items[len(items)-1].Key))
	}
	return c.JSON(http.StatusOK, a)
}

// decode reads a JSON body strictly: one object, no unknown fields, within
// the size limit.
func (s *Server) decode(c echo.Context, v any) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	return decodeStrict(body, v, "")
}

// readBody reads the request body within the size limit.
func (s *Server) readBody(c echo.Context) ([]byte, error) {
	limit := int64(2*s.cfg.MaxValueBytes + bodyOverheadMax)
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, limit+1))
	if err != nil {
		return nil, events.Errorf(events.EInvalid, "read body: %v", err)
	}
	if int64(len(body)) > limit {
		return nil, events.FieldErrorf(events.ETooLarge, "value", "request body is over %d bytes", limit)
	}
	return body, nil
}

// decodeStrict decodes one JSON value with no unknown fields; path prefixes
// the field names in errors.
func decodeStrict(b []byte, v any, path string) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return jsonError(err, path)
	}
	if d.More() {
		return events.Errorf(events.EInvalid, "body has data after the JSON object")
	}
	return nil
}

func jsonError(err error, path string) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return events.FieldErrorf(events.EInvalid, path+te.Field, "field %s must be %s", path+te.Field, te.Type.String())
	}
	msg := err.Error()
	if f, ok := cutUnknownField(msg); ok {
		return events.FieldErrorf(events.EInvalid, path+f, "unknown field %q", path+f)
	}
	if errors.Is(err, io.EOF) {
		return events.Errorf(events.EInvalid, "body is empty: send a JSON object")
	}
	return events.Errorf(events.EInvalid, "body is not valid JSON: %s", msg)
}

// cutUnknownField extracts the field name of encoding/json's unknown-field
// error, which has no typed form.
func cutUnknownField(msg string) (string, bool) {
	const p = `json: unknown field "`
	if len(msg) > len(p) && msg[:len(p)] == p {
		return msg[len(p) : len(msg)-1], true
	}
	return "", false
}

// checkText rejects strings Postgres jsonb cannot store: invalid UTF-8
// and NUL characters.
func checkText(field, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return events.FieldErrorf(events.EInvalid, field, "%s must be valid UTF-8 without NUL characters", field)
	}
	return nil
}

func checkCommon(expected *int64, requestID, specRef string) error {
	if err := checkText("requestId", requestID); err != nil {
		return err
	}
	if err := checkText("specRef", specRef); err != nil {
		return err
	}
	if expected != nil && *expected < 0 {
		return events.FieldErrorf(events.EInvalid, "expectedVersion", "expectedVersion must be 0 (must not exist) or a positive version")
	}
	if len(requestID) > maxRequestID {
		return events.FieldErrorf(events.EInvalid, "requestId", "requestId is longer than %d characters", maxRequestID)
	}
	if len(specRef) > maxSpecRef {
		return events.FieldErrorf(events.EInvalid, "specRef", "specRef is longer than %d characters", maxSpecRef)
	}
	return nil
}

func checkSemantics(s *events.Semantics) error {
	if s.Purpose == "" {
		s.Purpose = "other"
	}
	ok := false
	for _, p := range events.Purposes {
		ok = ok || p == s.Purpose
	}
	if !ok {
		return events.FieldErrorf(events.EInvalid, "semantics.purpose", "purpose %q is not one of %v", s.Purpose, events.Purposes)
	}
	if err := checkText("semantics.producer", s.Producer); err != nil {
		return err
	}
	for _, h := range s.ConsumerHints {
		if err := checkText("semantics.consumerHints", h); err != nil {
			return err
		}
	}
	if len(s.Producer) > maxProducer {
		return events.FieldErrorf(events.EInvalid, "semantics.producer", "producer is longer than %d characters", maxProducer)
	}
	if len(s.ConsumerHints) > maxHints {
		return events.FieldErrorf(events.EInvalid, "semantics.consumerHints", "at most %d consumer hints", maxHints)
	}
	for _, h := range s.ConsumerHints {
		if h == "" || len(h) > maxHintLen {
			return events.FieldErrorf(events.EInvalid, "semantics.consumerHints", "each consumer hint must be 1 to %d characters", maxHintLen)
		}
	}
	if s.TTLSeconds < 0 {
		return events.FieldErrorf(events.EInvalid, "semantics.ttlSeconds", "ttlSeconds must be positive")
	}
	return nil
}
