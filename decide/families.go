package decide

import (
	"encoding/json"

	"github.com/eskv/eskv/contract"
)

// Header is what every write carries, whatever its op family.
type Header struct {
	Key contract.Key
	// Op is the write's op; a family's command holds only its family's
	// ops (a denied write, of any op, is a KV command).
	Op        contract.Op
	RequestID string
	Principal string
	// Directive is the directive the write was made for
	// (contract.DirectiveOf), set by the API: its events carry it. It is
	// attribution, not content: no part of the request digest, so a
	// retry is a retry whatever directive it names.
	Directive string
	// Blind marks a write of a principal that may write its key but not
	// read it (set by the API; a transaction's steps each carry their
	// own): CheckBlind refuses what such a write may not ask, and a
	// blind sadd, srem or ltrim that changes nothing still appends, so
	// that its version tells nothing of the collection.
	Blind bool
}

// Command families (one type each, as etcd has one message per op), each
// with its own fields only.
type (
	// KV is a put, delete, expire, increment, patch or touch (or a
	// transaction's check), or a denied write of any op.
	KV struct {
		Header
		// Value is the compact JSON of a put.
		Value json.RawMessage
		// ExpectedVersion is nil for an unconditional write; 0 means the
		// key must not exist. For contract.OpExpire it is the version to
		// expire.
		ExpectedVersion *int64
		// TTLSeconds: for put, the entry's TTL (0: none, unless KeepTTL);
		// for increment and patch, a new TTL when > 0 (0 keeps the
		// entry's expiry); for touch, the new TTL (0: none, persist).
		TTLSeconds int64
		// KeepTTL makes a put without TTLSeconds keep the entry's expiry
		// (as Redis SET KEEPTTL does).
		KeepTTL bool
		// Semantics the write gives the entry; an empty Purpose keeps the
		// entry's (a plain write over a lock or leadership that breaks it
		// gets purpose other). SpecRef, when empty, keeps the entry's.
		Semantics contract.Semantics
		SpecRef   string
		// By is the increment's addend; Create lets increment and patch
		// create a missing key (from 0 and {}). Min and Max, when set,
		// bound an increment's result (out_of_range outside them).
		By       int64
		Create   bool
		Min, Max *int64
		// Set and Unset are a patch's top-level field changes (Unset
		// first); If, when set, makes the patch a field compare-and-swap.
		Set   map[string]json.RawMessage
		Unset []string
		If    *contract.FieldCondition
		// MaxValueBytes bounds the value an increment or patch produces
		// (0: unbounded).
		MaxValueBytes int
		// Session, on a put, attaches the key to the session at that
		// key (its TTL is then 0: the session's end deletes it); on a
		// session create, TTLSeconds is the session's TTL.
		Session string
		// Denied marks a write the API refused (403 forbidden) before the
		// writer saw it: it is only recorded in kv.conflicts with reason
		// forbidden, and appends nothing (AuditDenied).
		Denied bool
	}

	// Lock is a lock or leader op (acquire, extend, release).
	Lock struct {
		Header
		// Holder identifies the lock or leader-pool caller; TTLSeconds
		// is the lease.
		Holder     string
		TTLSeconds int64
		// Session, on an acquire or elect, attaches the tenure to the
		// session at that key: it then has no lease of its own.
		Session string
		// Semantics and SpecRef are as a KV write's; lock ops force the
		// purpose to theirs.
		Semantics contract.Semantics
		SpecRef   string
		// Queued: acquires wait for this lock ahead of this one (the
		// owning writer's queue of blocking acquires, writer/waits.go).
		// A queued acquire of a free lock is lock_held, so that no
		// acquire takes the lock ahead of those waiting for it; the
		// holder re-entering is not refused. Not part of the digest:
		// it is where the request stands, not what it asks.
		Queued bool
	}

	// Queue is a qpush, qpop, qack, qrequeue or qexpire.
	Queue struct {
		Header
		ExpectedVersion *int64
		// Value is a push's data; TTLSeconds the queue's TTL.
		Value      json.RawMessage
		TTLSeconds int64
		// A push's Priority, DedupID and item TTL in seconds (0: the item
		// never expires).
		Priority int64
		DedupID  string
		ItemTTL  int64
		// Visibility is a pop's visibility timeout in seconds (0: remove
		// at once).
		Visibility int64
		// Item and Delivery are what an ack's receipt (or the sweeper's
		// requeue or expire) names; ReceiptNonce is the receipt's random
		// part ("" for a delivery popped before receipts had one).
		Item         string
		Delivery     int64
		ReceiptNonce string
	}

	// List is an lpush, rpush, lpop, rpop or ltrim.
	List struct {
		Header
		ExpectedVersion *int64
		// Value is a push's value; TTLSeconds the list's TTL.
		Value      json.RawMessage
		TTLSeconds int64
		// Start and Stop are an ltrim's range.
		Start, Stop int64
	}

	// Set is an sadd or srem of Member.
	Set struct {
		Header
		ExpectedVersion *int64
		Member          string
		TTLSeconds      int64
	}

	// Txn is a multi-key transaction (Op contract.OpTxn): its steps are
	// decided in order, all or none. Key is the first step's key: every
	// step's key lies in its scope, so in its partition.
	Txn struct {
		Header
		Steps []TxnStep
	}

	// Range is a write of every key under a prefix (Op
	// contract.OpDeleteRange or contract.OpExpireDue; ranges.go). Key
	// is a key of the prefix's scope (its path empty): the prefix lies
	// inside it, so inside its partition.
	Range struct {
		Header
		Prefix string
		// After is the cursor: only keys after it are written.
		After string
		// Chunked lets a range delete remove the first
		// contract.MaxRangeKeys keys of a larger range (an expireDue
		// always may).
		Chunked bool
	}
)

// TxnStep is one operation of a transaction: a write of its key (a KV
// command: put, delete, increment or patch, or with Op contract.OpCheck
// a read-only condition on its key) under its condition Cond, which must
// hold for the step to apply. The API builds Write as the single-key
// write of the same op (with the transaction's principal), its
// ExpectedVersion from Cond.Version (or 0 for Cond.Exists false) and a
// patch's If from Cond's field, so the events name the ops as single-key
// writes would (create, cas, field_cas).
type TxnStep struct {
	Write *KV
	Cond  *contract.Condition
}
