package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// Operations on a key besides PUT, PATCH and DELETE are found by their
// contract.Op: GET /v1/kv/{key} and the custom methods GET
// /v1/kv/{key}:{verb} (reads) and POST /v1/kv/{key}:{verb} (writes). A key
// may hold ':' in its path, but its last ':' segment is never a verb name
// (contract.ParseKey), so the verb is the last ':' segment exactly when
// that is a known verb (contract.SplitVerb).
// A new operation is a row in events' op table and one here.

// handler serves one op once the key is parsed, the caller's right
// checked and the request routed to the key's owner. A row has read or
// write.
type handler struct {
	// read answers from e, the key's entry as a linearizable read sees it
	// (nil when absent).
	read func(c echo.Context, op contract.Op, k contract.Key, e *contract.Entry) error
	// write decodes the body and has the writer decide.
	write func(s *Server, c echo.Context, op contract.Op, p *Principal, k contract.Key) error
	// query serves a read that needs more than the key's entry (a set's
	// member, a page of its members), in place of read; params are the
	// query parameters it takes, checked before anything else (a
	// write's: wait, of the ops that wait, waits.go).
	query  func(s *Server, c echo.Context, op contract.Op, k contract.Key) error
	params []string
}

// handlers is the handler table: one row per op.
var handlers = map[contract.Op]handler{
	contract.OpGet:              {read: getEntry},
	contract.OpIncrement:        {write: (*Server).increment},
	contract.OpTouch:            {write: (*Server).touch},
	contract.OpSessionCreate:    {write: (*Server).session},
	contract.OpSessionKeepAlive: {write: (*Server).session},
	contract.OpSessionRevoke:    {write: (*Server).session},
	contract.OpLockAcquire:      {write: (*Server).lock, params: []string{"wait"}},
	contract.OpLockExtend:       {write: (*Server).lock},
	contract.OpLockRelease:      {write: (*Server).lock},
	contract.OpLeaderElect:      {write: (*Server).lock},
	contract.OpLeaderHeartbeat:  {write: (*Server).lock},
	contract.OpLeaderResign:     {write: (*Server).lock},
	contract.OpLockCheck:        {read: checkLock},
	contract.OpLeaderCheck:      {read: checkLock},
	contract.OpGetCounter:       {read: answer(decide.ReadCounter)},
	contract.OpFieldIndexStatus: {query: (*Server).fieldIndexStatus},
	contract.OpSAdd:             {write: (*Server).setMember},
	contract.OpSRem:             {write: (*Server).setMember},
	contract.OpSIsMember:        {query: (*Server).isMember, params: []string{"member"}},
	contract.OpSMembers:         {query: (*Server).members, params: []string{"limit", "cursor"}},
	contract.OpSCard:            {read: answer(decide.ReadCard)},
	contract.OpLPush:            {write: (*Server).push},
	contract.OpRPush:            {write: (*Server).push},
	contract.OpLPop:             {write: (*Server).pop, params: []string{"wait"}},
	contract.OpRPop:             {write: (*Server).pop, params: []string{"wait"}},
	contract.OpLTrim:            {write: (*Server).trim},
	contract.OpLRange:           {query: (*Server).lrange, params: []string{"start", "stop"}},
	contract.OpLLen:             {read: answer(decide.ReadLen)},
	contract.OpHistory:          {query: (*Server).history, params: []string{"fromVersion", "limit", "cursor"}},
	contract.OpQPush:            {write: (*Server).qpush},
	contract.OpQPop:             {write: (*Server).qpop, params: []string{"wait"}},
	contract.OpQAck:             {write: (*Server).qack},
	contract.OpQPeek:            {query: (*Server).qpeek, params: []string{"count"}},
	contract.OpQSize:            {read: answer(decide.ReadQueueSize)},
}

// answer is the read of an op whose answer f decides from the entry.
func answer[A any](f func(k contract.Key, e *contract.Entry) (A, error)) func(echo.Context, contract.Op, contract.Key, *contract.Entry) error {
	return func(c echo.Context, _ contract.Op, k contract.Key, e *contract.Entry) error {
		a, err := f(k, e)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, a)
	}
}

// opOf finds the op of a custom method's verb: a read or a write.
func opOf(verb string, read bool) (contract.Op, handler, bool) {
	op, ok := opOfVerb(verb, read)
	h := handlers[op]
	if !ok || (read && h.read == nil && h.query == nil) || (!read && h.write == nil) {
		return "", handler{}, false
	}
	return op, h, true
}

// keyPath is the key in the path of /v1/kv/{key}, percent-decoded once:
// net/http has decoded URL.Path. echo's route parameter is not that: echo
// matches on the raw path when it differs from the decoded one and on the
// decoded one otherwise, so decoding the parameter again would decode
// secret%2531 twice, to secret1.
func keyPath(c echo.Context) string {
	return strings.TrimPrefix(c.Request().URL.Path, "/v1/kv/")
}

// splitVerb cuts the ":verb" off the key in the route's path.
func splitVerb(c echo.Context) (raw, verb string) {
	return contract.SplitVerb(keyPath(c))
}

// get serves GET /v1/kv/{key} and the reads GET /v1/kv/{key}:{verb}.
func (s *Server) get(c echo.Context) error {
	raw, verb := splitVerb(c)
	op, h := contract.OpGet, handlers[contract.OpGet]
	if verb != "" {
		var ok bool
		if op, h, ok = opOf(verb, true); !ok {
			return contract.FieldErrorf(contract.EInvalid, "key", "unknown verb %q (GET takes %s)", verb, verbList(true, true))
		}
	}
	for q := range queryOf(c) {
		if ((q != "field" && q != "at") || op != contract.OpGet) && !slices.Contains(h.params, q) {
			if len(h.params) > 0 {
				return contract.FieldErrorf(contract.EInvalid, q, "unknown query parameter %q (:%s takes %s)", q, op.Verb(), strings.Join(h.params, ", "))
			}
			return contract.FieldErrorf(contract.EInvalid, q, "unknown query parameter %q (field and at, on a plain GET)", q)
		}
	}
	if err := givenOnce(queryOf(c)); err != nil {
		return err
	}
	if field, ok := queryOf(c)["field"]; ok {
		if err := contract.ValidateFieldName("field", field[0]); err != nil {
			return err
		}
	}
	past, err := parseAt(queryOf(c))
	if err != nil {
		return err
	}
	_, k, err := s.authorizeKey(c, Read, raw)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	if past != nil {
		return s.getAt(c, k, past)
	}
	if h.query != nil {
		return h.query(s, c, op, k)
	}
	st, at, err := s.w.StateAt(c.Request().Context(), k)
	if err != nil {
		return err
	}
	setPosition(c, &at)
	return h.read(c, op, k, st.Visible(s.now()))
}

// post serves the writes POST /v1/kv/{key}:{verb}.
func (s *Server) post(c echo.Context) error {
	raw, verb := splitVerb(c)
	if i := strings.LastIndexByte(raw, ':'); verb == "" && i >= 0 {
		// a write always has a verb: the last ':' segment names it
		raw, verb = raw[:i], raw[i+1:]
	}
	if verb == "" {
		return contract.FieldErrorf(contract.EInvalid, "key", "POST needs a verb after the key: %s%s (PUT writes a value)", raw, verbList(false, true))
	}
	op, h, ok := opOf(verb, false)
	if !ok {
		return contract.FieldErrorf(contract.EInvalid, "key", "unknown verb %q (%s)", verb, strings.Join(verbs(false), ", "))
	}
	return s.serveWrite(c, raw, func(c echo.Context, p *Principal, k contract.Key) error { return h.write(s, c, op, p, k) })
}

// writeFunc serves a write of key k by principal p, authorized and owned
// by this writer.
type writeFunc func(c echo.Context, p *Principal, k contract.Key) error

// writeHandler serves a write of the request's key with h; see serveWrite.
func (s *Server) writeHandler(h writeFunc) echo.HandlerFunc {
	return func(c echo.Context) error { return s.serveWrite(c, keyPath(c), h) }
}

// serveWrite checks the caller's right to write the key raw, forwards the
// request to the writer that owns the key when that is another, and
// otherwise serves it with h. Nothing reads the body before.
func (s *Server) serveWrite(c echo.Context, raw string, h writeFunc) error {
	p, k, err := s.authorizeKey(c, Write, raw)
	if err != nil {
		return err
	}
	if done, err := s.forward(c, k); done {
		return err
	}
	return h(c, p, k)
}
