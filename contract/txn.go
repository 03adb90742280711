package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Transactions: POST /v1/txn changes several keys of one project
// atomically. One project is one scope, one Kafka partition and so one
// writer: the owner decides every operation in order and appends all the
// events in one Kafka transaction, or appends none. Keys of two projects
// would need two writers to agree (two-phase commit); eskv does not do
// that, so such a transaction is invalid.

// Ops of a transaction besides the writes put, delete, increment and
// patch, and the op the writer names a whole transaction by.
const (
	// OpCheck is a transaction's read-only condition on a key it does not
	// write. It never appears in kv.changes; a failing check is the op of
	// the transaction's conflict record.
	OpCheck Op = "check"
	// OpTxn is POST /v1/txn, the whole transaction (logs and metrics).
	OpTxn Op = "txn"
)

// txnOps are the ops a transaction's operations take, in the order
// messages name them.
var txnOps = []Op{OpPut, OpDelete, OpIncrement, OpPatch, OpCheck}

// Condition guards one operation of a transaction: every member given
// must hold against the key's state when the operation is decided (as a
// read sees it: an expired entry is absent).
type Condition struct {
	// Version is the key's required version; 0 means it must be absent.
	Version *int64 `json:"version,omitempty"`
	// Exists requires the key to be present (true) or absent (false).
	Exists *bool `json:"exists,omitempty"`
	// Field and Equals require the key's top-level field to equal Equals
	// (compared as canonical JSON, as a patch's if does). A missing
	// field, an absent key and a value that is no object have every
	// field null.
	Field  string          `json:"field,omitempty"`
	Equals json.RawMessage `json:"equals,omitempty"`
}

// validate checks the condition; its fields are named from
// "condition".
func (c *Condition) validate() error {
	if c.Version == nil && c.Exists == nil && c.Field == "" && c.Equals == nil {
		return FieldErrorf(EInvalid, "condition", "a condition needs version, exists or field and equals")
	}
	if c.Version != nil && *c.Version < 0 {
		return FieldErrorf(EInvalid, "condition.version", "condition.version must be 0 (must not exist) or a positive version")
	}
	if c.Version != nil && c.Exists != nil && (*c.Version > 0) != *c.Exists {
		return FieldErrorf(EInvalid, "condition.exists", "condition.exists contradicts condition.version %d", *c.Version)
	}
	if c.Field == "" && c.Equals != nil {
		return FieldErrorf(EInvalid, "condition.field", "condition.equals needs condition.field")
	}
	if c.Field != "" {
		if err := ValidateFieldName("condition.field", c.Field); err != nil {
			return err
		}
		if c.Equals == nil {
			return FieldErrorf(EInvalid, "condition.equals", "condition.equals is required with condition.field (null matches a missing field)")
		}
	}
	return nil
}

// TxnOp is one operation of a transaction. Op says which members it
// takes: the members of the single-key request of the same op, without
// expectedVersion and requestId (the condition and the transaction's
// requestId stand for them):
//
//	put:       value, ttlSeconds, keepTtl, semantics, specRef (PutBody)
//	delete:    nothing else
//	increment: by, min, max, create, ttlSeconds, semantics, specRef (IncrementBody)
//	patch:     set, unset, create, ttlSeconds, semantics, specRef (PatchBody)
//	check:     nothing else; condition is required
//
// Every op may carry a condition.
type TxnOp struct {
	Op        Op         `json:"op"`
	Key       string     `json:"key"`
	Condition *Condition `json:"condition,omitempty"`

	Value      json.RawMessage            `json:"value,omitempty"`
	TTLSeconds *int64                     `json:"ttlSeconds,omitempty"`
	KeepTTL    bool                       `json:"keepTtl,omitempty"`
	Semantics  *Semantics                 `json:"semantics,omitempty"`
	SpecRef    string                     `json:"specRef,omitempty"`
	By         *int64                     `json:"by,omitempty"`
	Min        *int64                     `json:"min,omitempty"`
	Max        *int64                     `json:"max,omitempty"`
	Create     bool                       `json:"create,omitempty"`
	Set        map[string]json.RawMessage `json:"set,omitempty"`
	Unset      []string                   `json:"unset,omitempty"`
}

// txnMembers are the members each op takes besides op, key and
// condition.
var txnMembers = map[Op][]string{
	OpPut:       {"value", "ttlSeconds", "keepTtl", "semantics", "specRef"},
	OpDelete:    {},
	OpIncrement: {"by", "min", "max", "create", "ttlSeconds", "semantics", "specRef"},
	OpPatch:     {"set", "unset", "create", "ttlSeconds", "semantics", "specRef"},
	OpCheck:     {},
}

// given lists the members of o that are set, besides op, key and
// condition.
func (o *TxnOp) given() []string {
	var g []string
	add := func(name string, set bool) {
		if set {
			g = append(g, name)
		}
	}
	add("value", o.Value != nil)
	add("ttlSeconds", o.TTLSeconds != nil)
	add("keepTtl", o.KeepTTL)
	add("semantics", o.Semantics != nil)
	add("specRef", o.SpecRef != "")
	add("by", o.By != nil)
	add("min", o.Min != nil)
	add("max", o.Max != nil)
	add("create", o.Create)
	add("set", o.Set != nil)
	add("unset", o.Unset != nil)
	return g
}

// PutBody is the put o stands for, without its condition.
func (o *TxnOp) PutBody() PutBody {
	return PutBody{Value: o.Value, TTLSeconds: o.TTLSeconds, KeepTTL: o.KeepTTL, Semantics: o.Semantics, SpecRef: o.SpecRef}
}

// options are the write options o stands for, without its condition.
func (o *TxnOp) options() WriteOptions {
	return WriteOptions{Create: o.Create, TTLSeconds: o.TTLSeconds, Semantics: o.Semantics, SpecRef: o.SpecRef}
}

// IncrementBody is the increment o stands for, without its condition.
func (o *TxnOp) IncrementBody() IncrementBody {
	return IncrementBody{By: o.By, Min: o.Min, Max: o.Max, WriteOptions: o.options()}
}

// PatchBody is the patch o stands for, without its condition (a field
// condition becomes the patch's if: see the writer).
func (o *TxnOp) PatchBody() PatchBody {
	return PatchBody{Set: o.Set, Unset: o.Unset, WriteOptions: o.options()}
}

// Writes reports whether the op writes its key (every op but check).
func (o *TxnOp) Writes() bool { return o.Op != OpCheck }

// validate checks the op on its own, but its key (TxnBody.Keys) and the
// JSON values of value, set and condition.equals; fields are named
// inside the op.
func (o *TxnOp) validate() error {
	members, ok := txnMembers[o.Op]
	if !ok {
		ops := make([]string, len(txnOps))
		for i, op := range txnOps {
			ops[i] = string(op)
		}
		return FieldErrorf(EInvalid, "op", "op %q is not a transaction operation (%s)", o.Op, orList(ops))
	}
	for _, g := range o.given() {
		if !contains(members, g) {
			return FieldErrorf(EInvalid, g, "a %s takes no %s (it takes %s)", o.Op, g, takes(members))
		}
	}
	if o.Condition != nil {
		if err := o.Condition.validate(); err != nil {
			return err
		}
	}
	switch o.Op {
	case OpPut:
		if o.Value == nil {
			return FieldErrorf(EInvalid, "value", "value is required (use null explicitly)")
		}
		b := o.PutBody()
		return b.Validate()
	case OpIncrement:
		b := o.IncrementBody()
		return b.Validate()
	case OpPatch:
		b := o.PatchBody()
		return b.Validate()
	case OpCheck:
		if o.Condition == nil {
			return FieldErrorf(EInvalid, "condition", "a check needs a condition (it writes nothing)")
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// takes names the members an op takes for a message.
func takes(members []string) string {
	return strings.Join(append([]string{"key", "condition"}, members...), ", ")
}

// TxnBody is the body of POST /v1/txn.
type TxnBody struct {
	// RequestID makes the transaction idempotent: a retry whose written
	// keys still hold this transaction as their latest write is answered
	// with the same results (Eskv-Replayed: true) and writes nothing.
	RequestID string  `json:"requestId,omitempty"`
	Ops       []TxnOp `json:"ops"`
}

// Validate checks the body but the JSON values of its ops (value, set,
// condition.equals), whose size limit is the server's setting: 1 to
// MaxTxnOps ops, each valid, on keys of one project, no key twice. An
// error in an op names it: field ops[i].<member> and FailedOp i.
func (b *TxnBody) Validate() error {
	if err := checkCommon(nil, b.RequestID, ""); err != nil {
		return err
	}
	if len(b.Ops) == 0 {
		return FieldErrorf(EInvalid, "ops", "a transaction needs 1 to %d ops", MaxTxnOps)
	}
	if len(b.Ops) > MaxTxnOps {
		return FieldErrorf(EInvalid, "ops", "a transaction takes at most %d ops, not %d", MaxTxnOps, len(b.Ops))
	}
	for i := range b.Ops {
		if err := b.Ops[i].validate(); err != nil {
			return InOp(i, err)
		}
	}
	_, err := b.Keys()
	return err
}

// Keys parses the keys of the ops, in order. They must lie in one project
// (scope): keys of two projects are decided by two writers, which eskv
// never commits together. A key given twice is refused as DynamoDB's
// TransactWriteItems does: put the condition on the write itself.
func (b *TxnBody) Keys() ([]Key, error) {
	keys := make([]Key, len(b.Ops))
	seen := make(map[string]int, len(b.Ops))
	for i, o := range b.Ops {
		k, err := ParseKey(o.Key)
		if err != nil {
			return nil, InOp(i, err)
		}
		if i > 0 && k.Scope() != keys[0].Scope() {
			return nil, InOp(i, FieldErrorf(EInvalid, "key",
				"key %s is in project %s, op 0's in %s: a transaction changes keys of one project only (one project is one partition, decided by one writer in one Kafka transaction; eskv does not commit across projects)",
				o.Key, k.Scope(), keys[0].Scope()))
		}
		if j, dup := seen[k.String()]; dup {
			return nil, InOp(i, FieldErrorf(EInvalid, "key",
				"key %s is also op %d's: a transaction names each key once (put the condition on the write itself)", o.Key, j))
		}
		seen[k.String()] = i
		keys[i] = k
	}
	return keys, nil
}

// InOp names op i of a transaction in err, an *Error about one op: a
// copy whose field is ops[i].<field>, FailedOp i and message prefixed
// "op i: ". Any other error, or one naming an op already, is returned as
// is.
func InOp(i int, err error) error {
	var e *Error
	if !errors.As(err, &e) || e.FailedOp != nil {
		return err
	}
	c := *e
	c.Field = fmt.Sprintf("ops[%d]", i)
	if e.Field != "" {
		c.Field += "." + e.Field
	}
	c.FailedOp = &i
	c.Message = fmt.Sprintf("op %d: %s", i, c.Message)
	return &c
}

// TxnResult is what one operation of an applied transaction left: the
// key's version after it (a check: the version it found, 0 when absent)
// and, for a put, increment or patch answered to a principal that may
// read the key, its value.
type TxnResult struct {
	Key     string          `json:"key"`
	Version int64           `json:"version"`
	Value   json.RawMessage `json:"value,omitempty"`
}

// TxnAnswer is the answer of POST /v1/txn: the results in the order of
// the ops.
type TxnAnswer struct {
	// TxnID is the transaction's id, also in each of its events (txnId)
	// and in the audit trail. It is derived from the transaction's first
	// event, so a replay answers the same id.
	TxnID   string      `json:"txnId"`
	Results []TxnResult `json:"results"`
	// Replayed: see DeleteAnswer.Replayed.
	Replayed bool `json:"-"`
}

// Idempotent: see PutBody.Idempotent.
func (b *TxnBody) Idempotent() bool { return b.RequestID != "" }
