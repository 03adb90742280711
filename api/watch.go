package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/watch"
)

// Watcher serves watches (watch.Hub).
type Watcher interface {
	Watch(ctx context.Context, spec watch.Spec) (*watch.Sub, error)
}

// DefaultWatchHeartbeat is how often an idle watch sends a comment, so
// that proxies and load balancers keep the connection open.
const DefaultWatchHeartbeat = 15 * time.Second

// watchParams are the query parameters of GET /v1/watch.
var watchParams = map[string]bool{"prefix": true, "key": true, "after": true, "fromVersion": true}

// watchStream serves GET /v1/watch as Server-Sent Events: one event
// "change" per change of the prefix (or key) in log order, each with its
// cursor as the SSE id, so a browser's EventSource resumes with
// Last-Event-ID on its own. Any writer serves it, owner of the
// partition or not. The watch ends with an event "error" (slow_consumer
// with the cursor to resume after, cursor_expired, ...) or when the
// client goes away.
func (s *Server) watchStream(c echo.Context) error {
	if s.cfg.Watch == nil {
		return contract.Errorf(contract.ENotFound, "this server does not serve watches")
	}
	spec, err := s.watchSpec(c)
	if err != nil {
		return err
	}
	sub, err := s.cfg.Watch.Watch(c.Request().Context(), spec)
	if err != nil {
		return err
	}
	defer sub.Close()
	return s.stream(c, sub, writeChange)
}

// watchSpec reads and authorizes the query: a prefix or a key the
// principal may read all of, and at most one starting point.
func (s *Server) watchSpec(c echo.Context) (watch.Spec, error) {
	spec, err := ParseWatch(c.QueryParams(), c.Request().Header.Get("Last-Event-ID"))
	if err != nil {
		return spec, err
	}
	p := principalOf(c)
	spec.Principal = p.Name // the watch takes a slot of its principal's share
	switch {
	case spec.Prefix != "" && !p.AllowsPrefix(Read, spec.Prefix):
		return spec, contract.FieldErrorf(contract.EForbidden, "prefix", "principal %s may not read every key under %s", p.Name, spec.Prefix)
	case spec.Key != "" && !p.Allows(Read, spec.Key):
		return spec, contract.FieldErrorf(contract.EForbidden, "key", "principal %s may not read %s", p.Name, spec.Key)
	}
	return spec, nil
}

// ParseWatch reads the query of GET /v1/watch (and the Last-Event-ID
// header an EventSource resumes with): a valid prefix inside one project
// or a valid key, and at most one starting point. Errors are invalid,
// naming the parameter at fault.
func ParseWatch(q url.Values, lastEventID string) (watch.Spec, error) {
	var spec watch.Spec
	for name := range q {
		if !watchParams[name] {
			field := name
			if field == "" { // "?=x": the query itself is at fault
				field = "query"
			}
			return spec, contract.FieldErrorf(contract.EInvalid, field, "unknown query parameter %q (prefix, key, after, fromVersion)", name)
		}
		if len(q[name]) > 1 {
			return spec, contract.FieldErrorf(contract.EInvalid, name, "%s is given more than once", name)
		}
	}
	switch {
	case q.Has("prefix") == q.Has("key"):
		return spec, contract.FieldErrorf(contract.EInvalid, "prefix", "give either prefix (every key under it) or key (one key)")
	case q.Has("prefix"):
		if err := contract.ValidatePrefix(q.Get("prefix")); err != nil {
			return spec, err
		}
		spec.Prefix = q.Get("prefix")
	default:
		k, err := contract.ParseKey(q.Get("key"))
		if err != nil {
			return spec, err
		}
		spec.Key = k.String()
	}
	return spec, watchStart(q, lastEventID, &spec)
}

// watchStart reads the starting point: after (or lastEventID), or
// fromVersion with a key.
func watchStart(q url.Values, lastEventID string, spec *watch.Spec) error {
	after, field := q.Get("after"), "after"
	if !q.Has("after") {
		after, field = lastEventID, "Last-Event-ID"
	}
	if after != "" || q.Has("after") {
		cur, err := contract.ParseCursor(after, field)
		if err != nil {
			return err
		}
		spec.After = &cur
	}
	if !q.Has("fromVersion") {
		return nil
	}
	v, err := strconv.ParseInt(q.Get("fromVersion"), 10, 64)
	switch {
	case err != nil || v < 1:
		return contract.FieldErrorf(contract.EInvalid, "fromVersion", "fromVersion must be a version (an integer from 1)")
	case spec.Key == "":
		return contract.FieldErrorf(contract.EInvalid, "fromVersion", "fromVersion needs key= (versions are a key's)")
	case spec.After != nil:
		return contract.FieldErrorf(contract.EInvalid, "fromVersion", "give either after or fromVersion")
	}
	spec.FromVersion = v
	return nil
}

// stream writes sub's events, each with write, until it ends or the
// client goes away.
func (s *Server) stream(c echo.Context, sub *watch.Sub, write func(*echo.Response, watch.Item) error) error {
	w := c.Response()
	rc := http.NewResponseController(w)
	// The server's read timeout may end the request's context in
	// the middle of the stream; its write timeout is moved before each
	// write instead.
	_ = rc.SetReadDeadline(time.Time{})
	heartbeat := s.cfg.WatchHeartbeat
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(heartbeat + 30*time.Second)) }
	deadline()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	// An id without data sets an EventSource's last event id without an
	// event: a client that loses the connection before any change
	// resumes from where the watch started, not from a later "now".
	if _, err := fmt.Fprintf(w, ": watching\nid: %s\n\n", sub.Start()); err != nil {
		return nil
	}
	_ = rc.Flush()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	ctx := c.Request().Context()
	for {
		var err error
		select {
		case it, ok := <-sub.C:
			if !ok {
				deadline()
				return s.writeEnd(w, rc, sub)
			}
			deadline()
			err = write(w, it)
			if sub.Pending() == 0 {
				err = rc.Flush()
			}
		case <-tick.C:
			deadline()
			if _, err = fmt.Fprint(w, ": ping\n\n"); err == nil {
				err = rc.Flush()
			}
		case <-ctx.Done():
			return nil
		}
		if err != nil {
			return nil // the client went away; nothing to answer
		}
	}
}

// writeChange writes one SSE event "change"; its id is the cursor.
func writeChange(w *echo.Response, it watch.Item) error {
	b, err := contract.EncodeJSON(watchEventOf(it.Event, it.Cursor))
	if err != nil {
		return err
	}
	if bytes.ContainsAny(b, "\r\n") { // an SSE data line ends at a line break
		var buf bytes.Buffer
		if err := json.Compact(&buf, b); err != nil {
			return err
		}
		b = buf.Bytes()
	}
	_, err = fmt.Fprintf(w, "id: %s\nevent: change\ndata: %s\n\n", it.Cursor, b)
	return err
}

// writeEnd writes the SSE event "error" that ends a watch the hub ended.
func (s *Server) writeEnd(w *echo.Response, rc *http.ResponseController, sub *watch.Sub) error {
	end := contract.WatchEnd{Error: contract.ErrorDetail{Code: contract.EInternal, Message: "internal error"}}
	if e, ok := errors.AsType[*contract.Error](sub.Err()); ok {
		end.Error = e.Detail()
	}
	if end.Error.Code != contract.ECursorExpired {
		end.Cursor = sub.Resume().String()
	}
	b, err := json.Marshal(end)
	if err != nil {
		return nil
	}
	if _, err := fmt.Fprintf(w, "event: error\ndata: %s\n\n", b); err == nil {
		_ = rc.Flush()
	}
	return nil
}

// watchEventOf is e, read at c, as a watch delivers it.
func watchEventOf(e *contract.Event, c contract.Cursor) contract.WatchEvent {
	w := contract.WatchEvent{Cursor: c.String(), Key: e.Key, Version: e.Version, Kind: e.Kind, Op: e.Op,
		Time: e.TS, Principal: e.Principal, Directive: e.Directive, RequestID: e.RequestID, TxnID: e.TxnID, TxnSize: e.TxnSize, Element: projection.PublicElement(e.Element)}
	if e.Live() {
		w.Value, w.ExpiresAt = e.After, e.ExpiresAt
	}
	return w
}
