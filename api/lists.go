package api

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/writer"
)

// Lists (docs/collections.md, events/list.go): values are JSON, pushed in
// the body of :lpush and :rpush; pops and trims name no element.

// push serves POST /v1/kv/{key}:lpush and :rpush.
func (s *Server) push(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	var b contract.PushBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	value, err := codec.CompactValue(b.Value, s.cfg.MaxValueBytes)
	if err != nil {
		return err
	}
	var ttl int64
	if b.TTLSeconds != nil {
		ttl = *b.TTLSeconds
	}
	return s.listWrite(c, &decide.List{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name}, Value: value,
		ExpectedVersion: b.ExpectedVersion, TTLSeconds: ttl})
}

// pop serves POST /v1/kv/{key}:lpop and :rpop, with ?wait= (waits.go);
// the body is optional.
func (s *Server) pop(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	var b contract.PopBody
	if err := s.decodeOptional(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	req := &decide.List{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name},
		ExpectedVersion: b.ExpectedVersion}
	res, err := s.writeWait(c, req)
	if err != nil {
		return err
	}
	return s.listAnswer(c, req, res)
}

// trim serves POST /v1/kv/{key}:ltrim.
func (s *Server) trim(c echo.Context, op contract.Op, p *Principal, k contract.Key) error {
	var b contract.TrimBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	return s.listWrite(c, &decide.List{Header: decide.Header{Key: k, Op: op, RequestID: b.RequestID, Principal: p.Name},
		Start: *b.Start, Stop: *b.Stop, ExpectedVersion: b.ExpectedVersion})
}

// listWrite has the writer decide req and answers it. A caller with only
// the write right learns neither the popped value nor the length.
func (s *Server) listWrite(c echo.Context, req *decide.List) error {
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	return s.listAnswer(c, req, res)
}

// listAnswer answers res, what the writer decided of req.
func (s *Server) listAnswer(c echo.Context, req *decide.List, res writer.Result) error {
	if res.Entry.Key == "" {
		res.Entry.Key = req.Key.String()
	}
	a := decide.ListAnswer(res)
	if !mayRead(c, req.Key.String()) {
		a.Value, a.Length = nil, 0
	}
	return c.JSON(http.StatusOK, a)
}

// decodeOptional is decode for a body that may be empty.
func (s *Server) decodeOptional(c echo.Context, v any) error {
	_, err := decodeBodyOrEmpty(c, v, bodyOverheadMax)
	return err
}

// rangeIndex reads the start or stop query parameter of lrange.
func rangeIndex(q url.Values, name string) (int64, error) {
	v, ok := q[name]
	if !ok {
		return 0, contract.FieldErrorf(contract.EInvalid, name, "lrange needs the %s query parameter", name)
	}
	n, err := strconv.ParseInt(v[0], 10, 64)
	if err != nil {
		return 0, contract.FieldErrorf(contract.EInvalid, name, "%s must be an integer (negative counts from the end)", name)
	}
	return n, nil
}

// lrange serves GET /v1/kv/{key}:lrange?start=&stop=: the values from
// index start to stop (inclusive, negative from the end), at most
// contract.MaxRange of them and no more than fit in MaxListBytes (but at
// least one; truncated: continue from start+len(values)), linearizable like smembers (the owner waits
// until the projection holds every change of the list it acknowledged,
// then one snapshot reads the metadata and one range scan of positions).
func (s *Server) lrange(c echo.Context, _ contract.Op, k contract.Key) error {
	q := c.QueryParams()
	start, err := rangeIndex(q, "start")
	if err != nil {
		return err
	}
	stop, err := rangeIndex(q, "stop")
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	st, err := s.w.State(ctx, k)
	if err != nil {
		return err
	}
	if _, err := decide.ReadLen(k, st.Visible(s.now())); err != nil {
		return err // not a list
	}
	where, err := s.w.AwaitProjected(ctx, k.String())
	if err != nil {
		return err
	}
	release, err := s.takeList(c) // a page in memory until it is answered
	if err != nil {
		return err
	}
	defer release()
	ctx = c.Request().Context() // names the reader (takeList)
	var values []json.RawMessage
	var truncated bool
	at, err := s.readProjected(ctx, where, func(l Lister) (err error) {
		values, truncated, err = l.Range(ctx, k.String(), start, stop, projection.Page{Limit: contract.MaxRange, MaxBytes: s.cfg.MaxListBytes, Now: s.now()})
		return err
	})
	if err != nil {
		return err
	}
	setPosition(c, at)
	return c.JSON(http.StatusOK, contract.RangeAnswer{List: k.String(), Values: values, Truncated: truncated, Position: positionText(at)})
}
