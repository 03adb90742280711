package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/events"
	"github.com/eskv/eskv/writer"
)

// Coordination operations are custom methods on a key: POST
// /v1/kv/{key}:{verb}. Keys never contain ':', so the verb cannot be
// mistaken for part of the key.

// DefaultLockTTLSeconds is the lease of a lock or leadership when the
// request gives none.
const DefaultLockTTLSeconds = 60

// Limits of the coordination operations' inputs.
const (
	maxHolder    = 256
	maxFieldName = 256
	maxFields    = 256
)

// IncrementBody is the body of POST /v1/kv/{key}:increment.
type IncrementBody struct {
	By              *int64            `json:"by,omitempty"`
	Create          bool              `json:"create,omitempty"`
	ExpectedVersion *int64            `json:"expectedVersion,omitempty"`
	TTLSeconds      *int64            `json:"ttlSeconds,omitempty"`
	Semantics       *events.Semantics `json:"semantics,omitempty"`
	RequestID       string            `json:"requestId,omitempty"`
	SpecRef         string            `json:"specRef,omitempty"`
}

// LockBody is the body of the lock and leader verbs: acquire, extend,
// release, elect, heartbeat, resign.
type LockBody struct {
	Holder     string            `json:"holder"`
	TTLSeconds *int64            `json:"ttlSeconds,omitempty"`
	Semantics  *events.Semantics `json:"semantics,omitempty"`
	RequestID  string            `json:"requestId,omitempty"`
	SpecRef    string            `json:"specRef,omitempty"`
}

// LockAnswer describes a held lock or leadership.
type LockAnswer struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	// Token is the fencing token: the entry's version when Holder's
	// tenure began. It grows strictly from tenure to tenure.
	Token      int64      `json:"token"`
	Version    int64      `json:"version"`
	AcquiredAt time.Time  `json:"acquiredAt"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
	// Reentered is true when the holder already held it (the tenure and
	// its token go on; the lease was renewed).
	Reentered bool `json:"reentered"`
}

// ReleaseAnswer is the answer of release and resign.
type ReleaseAnswer struct {
	Key      string `json:"key"`
	Version  int64  `json:"version"`
	Released bool   `json:"released"`
}

// FieldCondition guards a patch (PatchBody.If).
type FieldCondition struct {
	Field  string          `json:"field"`
	Equals json.RawMessage `json:"equals"`
}

// PatchBody is the body of PATCH /v1/kv/{key}.
type PatchBody struct {
	Set             map[string]json.RawMessage `json:"set,omitempty"`
	Unset           []string                   `json:"unset,omitempty"`
	If              *FieldCondition            `json:"if,omitempty"`
	Create          bool                       `json:"create,omitempty"`
	ExpectedVersion *int64                     `json:"expectedVersion,omitempty"`
	TTLSeconds      *int64                     `json:"ttlSeconds,omitempty"`
	Semantics       *events.Semantics          `json:"semantics,omitempty"`
	RequestID       string                     `json:"requestId,omitempty"`
	SpecRef         string                     `json:"specRef,omitempty"`
}

// FieldAnswer is the answer of GET /v1/kv/{key}?field=NAME.
type FieldAnswer struct {
	Key     string          `json:"key"`
	Version int64           `json:"version"`
	Field   string          `json:"field"`
	Value   json.RawMessage `json:"value"`
}

// lockVerbs maps the verbs of POST /v1/kv/{key}:{verb} on lock-shaped
// keys to their op and role.
var lockVerbs = map[string]struct {
	op   writer.Op
	role writer.Role
}{
	"acquire":   {writer.OpAcquire, writer.RoleLock},
	"extend":    {writer.OpExtend, writer.RoleLock},
	"release":   {writer.OpRelease, writer.RoleLock},
	"elect":     {writer.OpAcquire, writer.RoleLeader},
	"heartbeat": {writer.OpExtend, writer.RoleLeader},
	"resign":    {writer.OpRelease, writer.RoleLeader},
}

// splitVerb cuts the ":verb" off the key in the route's path.
func splitVerb(c echo.Context) (raw, verb string, err error) {
	raw, err = url.PathUnescape(c.Param("*"))
	if err != nil {
		return "", "", events.FieldErrorf(events.EInvalid, "key", "key is not a valid URL path: %v", err)
	}
	if i := strings.LastIndexByte(raw, ':'); i >= 0 {
		return raw[:i], raw[i+1:], nil
	}
	return raw, "", nil
}

// post serves the custom methods POST /v1/kv/{key}:{verb}.
func (s *Server) post(c echo.Context) error {
	raw, verb, err := splitVerb(c)
	if err != nil {
		return err
	}
	if verb == "" {
		return events.FieldErrorf(events.EInvalid, "key", "POST needs a verb after the key: %s:increment, :acquire, :extend, :release, :elect, :heartbeat or :resign (PUT writes a value)", raw)
	}
	if _, ok := lockVerbs[verb]; !ok && verb != "increment" {
		return events.FieldErrorf(events.EInvalid, "key", "unknown verb %q (increment, acquire, extend, release, elect, heartbeat, resign)", verb)
	}
	p, k, err := s.authorizeKey(c, Write, raw)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	if verb == "increment" {
		return s.increment(c, p, k)
	}
	return s.lock(c, p, k, verb)
}

func (s *Server) increment(c echo.Context, p *Principal, k events.Key) error {
	var b IncrementBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	sem := b.Semantics
	req := &writer.Request{Key: k, Op: writer.OpIncrement, By: 1, Create: b.Create, ExpectedVersion: b.ExpectedVersion,
		RequestID: b.RequestID, SpecRef: b.SpecRef, Principal: p.Name}
	if b.By != nil {
		if *b.By == 0 {
			return events.FieldErrorf(events.EInvalid, "by", "by must not be 0 (read the key with GET)")
		}
		req.By = *b.By
	}
	if err := checkCommon(b.ExpectedVersion, b.RequestID, b.SpecRef); err != nil {
		return err
	}
	var err error
	if req.Semantics, req.TTLSeconds, err = optionalSemantics(sem, b.TTLSeconds); err != nil {
		return err
	}
	return s.doEntry(c, req)
}

// optionalSemantics checks the semantics and TTL of an op that keeps the
// entry's own when the request gives none (increment, patch).
func optionalSemantics(sem *events.Semantics, ttl *int64) (events.Semantics, int64, error) {
	var out events.Semantics
	if sem != nil {
		out = *sem
		if err := checkSemantics(&out); err != nil {
			return out, 0, err
		}
	}
	var t int64
	if ttl != nil {
		if *ttl < 1 || *ttl > MaxTTLSeconds {
			return out, 0, events.FieldErrorf(events.EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and %d (omit it to keep the entry's expiry)", MaxTTLSeconds)
		}
		t = *ttl
	}
	if out.TTLSeconds != 0 && t != 0 && out.TTLSeconds != t {
		return out, 0, events.FieldErrorf(events.EInvalid, "semantics.ttlSeconds", "semantics.ttlSeconds differs from ttlSeconds")
	}
	if t == 0 {
		t = out.TTLSeconds
	}
	return out, t, nil
}

func (s *Server) lock(c echo.Context, p *Principal, k events.Key, verb string) error {
	v := lockVerbs[verb]
	var b LockBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	sem := b.Semantics
	if b.Holder == "" {
		return events.FieldErrorf(events.EInvalid, "holder", "holder is required: the id of the process taking part (for example host/pid or a UUID)")
	}
	if len(b.Holder) > maxHolder {
		return events.FieldErrorf(events.EInvalid, "holder", "holder is longer than %d characters", maxHolder)
	}
	if err := checkText("holder", b.Holder); err != nil {
		return err
	}
	if err := checkCommon(nil, b.RequestID, b.SpecRef); err != nil {
		return err
	}
	req := &writer.Request{Key: k, Op: v.op, Role: v.role, Holder: b.Holder, RequestID: b.RequestID, SpecRef: b.SpecRef, Principal: p.Name}
	if v.op == writer.OpRelease {
		if b.TTLSeconds != nil {
			return events.FieldErrorf(events.EInvalid, "ttlSeconds", "%s takes only holder, requestId and specRef", verb)
		}
		if sem != nil {
			return events.FieldErrorf(events.EInvalid, "semantics", "%s takes only holder, requestId and specRef", verb)
		}
	} else {
		req.TTLSeconds = DefaultLockTTLSeconds
		if b.TTLSeconds != nil {
			if *b.TTLSeconds < 1 || *b.TTLSeconds > MaxTTLSeconds {
				return events.FieldErrorf(events.EInvalid, "ttlSeconds", "ttlSeconds (the lease) must be between 1 and %d", MaxTTLSeconds)
			}
			req.TTLSeconds = *b.TTLSeconds
		}
		if sem != nil {
			if sem.Purpose != "" && sem.Purpose != string(v.role) {
				return events.FieldErrorf(events.EInvalid, "semantics.purpose", "a %s's purpose is %s", v.role, v.role)
			}
			if sem.TTLSeconds != 0 {
				return events.FieldErrorf(events.EInvalid, "semantics.ttlSeconds", "give the lease as ttlSeconds")
			}
			req.Semantics = *sem
			req.Semantics.Purpose = string(v.role)
			if err := checkSemantics(&req.Semantics); err != nil {
				return err
			}
		}
	}
	res, err := s.w.Do(c.Request().Context(), req)
	if err != nil {
		return err
	}
	replayed(c, res)
	if v.op == writer.OpRelease {
		return c.JSON(http.StatusOK, ReleaseAnswer{Key: k.String(), Version: res.Entry.Version, Released: true})
	}
	a, err := lockAnswer(&res.Entry)
	if err != nil {
		return err
	}
	a.Reentered = v.op == writer.OpAcquire && a.Token != a.Version
	return c.JSON(http.StatusOK, a)
}

// lockAnswer reads a lock-shaped entry.
func lockAnswer(e *events.Entry) (LockAnswer, error) {
	var v writer.LockValue
	if err := json.Unmarshal(e.Value, &v); err != nil || v.Holder == "" {
		return LockAnswer{}, events.FieldErrorf(events.EWrongType, "key", "key %s does not hold a lock value", e.Key)
	}
	return LockAnswer{Key: e.Key, Holder: v.Holder, Token: v.Token, Version: e.Version, AcquiredAt: v.AcquiredAt, ExpiresAt: e.ExpiresAt}, nil
}

// checkLock answers GET /v1/kv/{key}:lock and :leader.
func (s *Server) checkLock(c echo.Context, e *events.Entry, k events.Key, role writer.Role) error {
	if e == nil {
		what := "lock"
		if role == writer.RoleLeader {
			what = "leader pool"
		}
		return events.FieldErrorf(events.ENotFound, "key", "%s %s is free", what, k.String())
	}
	if e.Semantics.Purpose != string(role) {
		err := events.FieldErrorf(events.EWrongType, "key", "key %s is a %s entry, not a %s", k.String(), e.Semantics.Purpose, role)
		err.Current = e
		return err
	}
	a, err := lockAnswer(e)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}

// getField answers GET /v1/kv/{key}?field=NAME.
func getField(c echo.Context, e *events.Entry, field string) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(e.Value, &fields); err != nil || fields == nil {
		err := events.FieldErrorf(events.EWrongType, "field", "key %s does not hold a JSON object", e.Key)
		err.Current = e
		return err
	}
	v, ok := fields[field]
	if !ok {
		return events.FieldErrorf(events.ENotFound, "field", "key %s has no field %q", e.Key, field)
	}
	return c.JSON(http.StatusOK, FieldAnswer{Key: e.Key, Version: e.Version, Field: field, Value: v})
}

func (s *Server) patch(c echo.Context) error {
	p, k, err := s.authorize(c, Write)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	var b PatchBody
	if err := s.decodeBody(c, &b); err != nil {
		return err
	}
	sem := b.Semantics
	if len(b.Set) == 0 && len(b.Unset) == 0 {
		return events.FieldErrorf(events.EInvalid, "set", "a patch needs fields to set or unset")
	}
	if len(b.Set)+len(b.Unset) > maxFields {
		return events.FieldErrorf(events.EInvalid, "set", "a patch changes at most %d fields", maxFields)
	}
	req := &writer.Request{Key: k, Op: writer.OpPatch, Create: b.Create, ExpectedVersion: b.ExpectedVersion,
		RequestID: b.RequestID, SpecRef: b.SpecRef, Principal: p.Name, MaxValueBytes: s.cfg.MaxValueBytes,
		Set: make(map[string]json.RawMessage, len(b.Set)), Unset: b.Unset}
	for f, v := range b.Set {
		if err := checkFieldName("set", f); err != nil {
			return err
		}
		if v == nil {
			v = json.RawMessage("null")
		}
		cv, err := events.CompactValue(v, s.cfg.MaxValueBytes)
		if err != nil {
			var e *events.Error
			if errors.As(err, &e) {
				e.Field = "set." + f
			}
			return err
		}
		req.Set[f] = cv
	}
	for _, f := range b.Unset {
		if err := checkFieldName("unset", f); err != nil {
			return err
		}
		if _, ok := b.Set[f]; ok {
			return events.FieldErrorf(events.EInvalid, "unset", "field %q is both set and unset", f)
		}
	}
	if b.If != nil {
		if err := checkFieldName("if.field", b.If.Field); err != nil {
			return err
		}
		if b.If.Equals == nil {
			return events.FieldErrorf(events.EInvalid, "if.equals", "if.equals is required (null matches a missing field)")
		}
		eq, err := events.CompactValue(b.If.Equals, s.cfg.MaxValueBytes)
		if err != nil {
			return events.FieldErrorf(events.EInvalid, "if.equals", "if.equals: %v", err)
		}
		req.If = &writer.FieldCondition{Field: b.If.Field, Equals: eq}
	}
	if err := checkCommon(b.ExpectedVersion, b.RequestID, b.SpecRef); err != nil {
		return err
	}
	if req.Semantics, req.TTLSeconds, err = optionalSemantics(sem, b.TTLSeconds); err != nil {
		return err
	}
	return s.doEntry(c, req)
}

// decodeBody decodes a JSON body strictly into v (a struct with an
// optional Semantics field); errors inside semantics name their full path.
func (s *Server) decodeBody(c echo.Context, v any) error {
	body, err := s.readBody(c)
	if err != nil {
		return err
	}
	var probe struct {
		Semantics json.RawMessage `json:"semantics"`
	}
	if json.Unmarshal(body, &probe) == nil && len(probe.Semantics) > 0 && string(probe.Semantics) != "null" {
		if err := decodeStrict(probe.Semantics, new(events.Semantics), "semantics."); err != nil {
			return err
		}
	}
	return decodeStrict(body, v, "")
}

func checkFieldName(where, f string) error {
	if f == "" || len(f) > maxFieldName {
		return events.FieldErrorf(events.EInvalid, where, "field names must be 1 to %d bytes", maxFieldName)
	}
	return checkText(where, f)
}

// doEntry runs a request whose answer is the entry after it.
func (s *Server) doEntry(c echo.Context, req *writer.Request) error {
	res, err := s.w.Do(c.Request().Context(), req)
	if err != nil {
		return err
	}
	replayed(c, res)
	return c.JSON(http.StatusOK, res.Entry)
}

func replayed(c echo.Context, res writer.Result) {
	if res.Replayed {
		c.Response().Header().Set("Eskv-Replayed", "true")
	}
}
