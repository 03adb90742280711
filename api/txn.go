package api

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// txnDeniedKey holds, in a refused transaction's context, the op the
// caller may not make: the denial's log line names its key, and the
// audit record its write (writeOp).
const txnDeniedKey = "txnDenied"

// txnDenied is the refused op of a transaction.
type txnDenied struct {
	op    contract.Op
	key   string
	write bool
}

// txn serves POST /v1/txn: the operations of the body applied to keys of
// one project atomically (contract.TxnBody). Unlike the writes of one key
// it reads the body before authorizing, since the keys are in it: 400
// for a malformed body, then 403 naming the first op whose key the
// caller may not write (read, for a check), then the key's owner
// decides (forwarded like any write of the project).
func (s *Server) txn(c echo.Context) error {
	p := principalOf(c)
	if err := noQuery(c); err != nil {
		return err
	}
	b, body, err := decodeTxn(c, LargestBody(s.cfg.MaxValueBytes))
	if err != nil {
		return err
	}
	if err := b.Validate(); err != nil {
		return err
	}
	keys, err := b.Keys()
	if err != nil {
		return err
	}
	for i, o := range b.Ops {
		right := Write
		if !o.Writes() {
			right = Read
		}
		if !p.Allows(right, keys[i].String()) {
			c.Set(txnDeniedKey, txnDenied{op: o.Op, key: keys[i].String(), write: o.Writes()})
			return contract.InOp(i, contract.FieldErrorf(contract.EForbidden, "key", "principal %s may not %s %s", p.Name, right, keys[i].String()))
		}
	}
	req, err := s.txnRequest(&b, keys, p.Name)
	if err != nil {
		return err
	}
	c.Request().Body = io.NopCloser(bytes.NewReader(body)) // for the owner, when forwarded
	if done, err := s.forward(c, keys[0]); done {
		return err
	}
	res, err := s.write(c, req)
	if err != nil {
		return err
	}
	for i := range res.Txn {
		if !mayRead(c, res.Txn[i].Key) {
			res.Txn[i].Value = nil
		}
	}
	return c.JSON(http.StatusOK, contract.TxnAnswer{TxnID: res.TxnID, Results: res.Txn})
}

// txnRequest is the writer's request of a valid transaction body whose
// keys are keys: each op becomes the single-key write of the same op
// (putRequest, incrementRequest, patchRequest), its condition's version
// (or exists false, version 0) its expected version and a patch's field
// condition its if; a check becomes a step of op check.
func (s *Server) txnRequest(b *contract.TxnBody, keys []contract.Key, principal string) (*decide.Txn, error) {
	r := &decide.Txn{Header: decide.Header{Key: keys[0], Op: contract.OpTxn, RequestID: b.RequestID, Principal: principal},
		Steps: make([]decide.TxnStep, len(b.Ops))}
	for i := range b.Ops {
		sub, cond, err := s.txnStep(&b.Ops[i], keys[i], principal)
		if err != nil {
			return nil, contract.InOp(i, err)
		}
		r.Steps[i] = decide.TxnStep{Write: sub, Cond: cond}
	}
	return r, nil
}

// txnStep is the request and condition of op o on key k.
func (s *Server) txnStep(o *contract.TxnOp, k contract.Key, principal string) (*decide.KV, *contract.Condition, error) {
	var expected *int64
	cond := o.Condition
	if cond != nil {
		c := *cond
		if c.Equals != nil {
			eq, err := codec.CompactValue(c.Equals, s.cfg.MaxValueBytes)
			if err != nil {
				return nil, nil, contract.FieldErrorf(contract.EInvalid, "condition.equals", "condition.equals: %v", err)
			}
			c.Equals = eq
		}
		cond = &c
		expected = c.Version
		if expected == nil && c.Exists != nil && !*c.Exists {
			zero := int64(0)
			expected = &zero
		}
	}
	switch o.Op {
	case contract.OpPut:
		value, err := codec.CompactValue(o.Value, s.cfg.MaxValueBytes)
		if err != nil {
			return nil, nil, err
		}
		pb := o.PutBody()
		pb.ExpectedVersion = expected
		return putRequest(k, &pb, value, principal), cond, nil
	case contract.OpIncrement:
		ib := o.IncrementBody()
		ib.ExpectedVersion = expected
		return incrementRequest(k, &ib, principal), cond, nil
	case contract.OpPatch:
		pb := o.PatchBody()
		pb.ExpectedVersion = expected
		if cond != nil && cond.Field != "" {
			pb.If = &contract.FieldCondition{Field: cond.Field, Equals: cond.Equals}
		}
		req, err := s.patchRequest(k, &pb, principal)
		return req, cond, err
	case contract.OpDelete:
		return &decide.KV{Header: decide.Header{Key: k, Op: contract.OpDelete, Principal: principal}, ExpectedVersion: expected}, cond, nil
	}
	return &decide.KV{Header: decide.Header{Key: k, Op: contract.OpCheck, Principal: principal}}, cond, nil
}

// noQuery refuses any query parameter, naming the first in order.
func noQuery(c echo.Context) error {
	if names := slices.Sorted(maps.Keys(c.QueryParams())); len(names) > 0 {
		return contract.FieldErrorf(contract.EInvalid, names[0], "unknown query parameter %q (a transaction takes none)", names[0])
	}
	return nil
}

// txnEnvelope is a transaction body with its ops undecoded.
type txnEnvelope struct {
	RequestID string            `json:"requestId,omitempty"`
	Ops       []json.RawMessage `json:"ops"`
}

// decodeTxn decodes a transaction body of at most limit bytes as decode
// does, op by op, so that an error inside op i names it (field
// ops[i].<member>, failedOp i): encoding/json's own errors leave the
// index out.
func decodeTxn(c echo.Context, limit int) (contract.TxnBody, []byte, error) {
	var env txnEnvelope
	body, err := decodeBody(c, &env, limit)
	if err != nil {
		return contract.TxnBody{}, nil, err
	}
	b := contract.TxnBody{RequestID: env.RequestID, Ops: make([]contract.TxnOp, len(env.Ops))}
	for i, raw := range env.Ops {
		if err := decodeOne(raw, &b.Ops[i]); err != nil {
			return b, nil, contract.InOp(i, err)
		}
		if err := checkMembers(raw, reflect.TypeFor[contract.TxnOp](), ""); err != nil {
			return b, nil, contract.InOp(i, err)
		}
	}
	return b, body, nil
}
