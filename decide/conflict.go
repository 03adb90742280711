package decide

import (
	"encoding/json"
	"time"

	"github.com/eskv/eskv/contract"
)

// Conflict is a rejected compare-and-swap, as recorded in kv.conflicts for
// conflict-rate analytics. It never enters kv.changes.
type Conflict struct {
	SchemaVersion   int                `json:"schemaVersion"`
	ID              string             `json:"id"` // correlation id, also in the WARN log and the 409 answer
	Key             string             `json:"key"`
	Scope           string             `json:"scope"`
	Op              contract.Op        `json:"op"`
	ExpectedVersion int64              `json:"expectedVersion"`
	CurrentVersion  int64              `json:"currentVersion"`
	Attempted       json.RawMessage    `json:"attempted"`
	Current         json.RawMessage    `json:"current"`
	Semantics       contract.Semantics `json:"semantics"`
	SpecRef         string             `json:"specRef,omitempty"`
	RequestID       string             `json:"requestId,omitempty"`
	Principal       string             `json:"principal"`
	TS              time.Time          `json:"ts"`
	// Reason is version_mismatch | request_id_reused | stale_request |
	// field_mismatch | forbidden, or the error code of a refused
	// transaction's step or of a refused range delete (too_many_keys,
	// value_too_large: Key is then its prefix, Op delete_range).
	Reason string `json:"reason"`
	// TxnID is set when the rejected write was an operation of a
	// multi-key transaction: the one conflict record of the rejected
	// transaction, for its first failing operation, TxnOp (its index in
	// the request, from 0), TxnSize operations in all. Key, versions and
	// values are those of that operation.
	TxnID   string `json:"txnId,omitempty"`
	TxnOp   *int   `json:"txnOp,omitempty"`
	TxnSize int    `json:"txnSize,omitempty"`
}

// ReasonForbidden is the reason of a denied write: an authenticated
// principal was refused (403 forbidden) a write of the key. Such a record
// is an audit trace, not a conflict: Attempted and Current are null (the
// server never reads the body of a refused write, and a denial reveals no
// value), ExpectedVersion is -1 and CurrentVersion 0, and conflict rates
// leave it out.
const ReasonForbidden = "forbidden"
