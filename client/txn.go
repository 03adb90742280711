package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/eskv/eskv/contract"
)

// Txn applies the operations of b to keys of one project atomically
// (POST /v1/txn): either every operation applies, each written key
// getting one new version, or none does. The answer lists each op's
// result in order; Replayed says the server answered a retry of an
// applied transaction (same RequestID and body) without writing again.
//
// A failed operation is an *contract.Error whose FailedOp is its index in
// b.Ops: a condition that does not hold is contract.EConflict (version,
// exists) or contract.EFieldMismatch (field equals) with Current holding
// the key's entry (its value only for a principal that may read it);
// other codes (contract.ENotFound, contract.EWrongType, ...) are the op's
// own. A 400 (contract.EInvalid) about an op also sets FailedOp and names
// the field as ops[i].<member>. Txn is retried on 503 and network errors
// only when b carries a RequestID.
func (c *Client) Txn(ctx context.Context, b contract.TxnBody) (contract.TxnAnswer, error) {
	body, err := marshal(&b)
	if err != nil {
		return contract.TxnAnswer{}, err
	}
	var a contract.TxnAnswer
	h, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/txn", body: body, retry: b.Idempotent()}, &a)
	if err != nil {
		return contract.TxnAnswer{}, txnError(err, &b)
	}
	a.Replayed = h.Get("Eskv-Replayed") == "true"
	return a, nil
}

// txnError names the failing op's key in err's Current: the answer
// carries the op's index, the request its key.
func txnError(err error, b *contract.TxnBody) error {
	var e *contract.Error
	if errors.As(err, &e) && e.FailedOp != nil && *e.FailedOp >= 0 && *e.FailedOp < len(b.Ops) && e.Current != nil {
		e.Current.Key = b.Ops[*e.FailedOp].Key
	}
	return err
}
