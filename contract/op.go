package contract

import "strings"

// Op names one operation on a key. A write op is also the op of the
// change event it appends (Event.Op), with two exceptions decided by the
// request: a put appends set, create or cas, and a patch appends patch or
// field_cas. Custom methods (POST /v1/kv/{key}:{verb}, and GET
// /v1/kv/{key}:{verb} for reads) are found by their verb (Verb; the
// server's router indexes Ops by it).
type Op string

// Reads. They change nothing and need the read right.
const (
	OpGet         Op = "get"          // GET /v1/kv/{key}
	OpLockCheck   Op = "lock_check"   // GET /v1/kv/{key}:lock
	OpLeaderCheck Op = "leader_check" // GET /v1/kv/{key}:leader
	OpGetCounter  Op = "get_counter"  // GET /v1/kv/{key}:counter
	// OpFieldIndexStatus reads whether each field a project declares is
	// indexed yet: GET /v1/kv/{scope}/.eskv/field-indexes:indexStatus.
	OpFieldIndexStatus Op = "field_index_status"
)

// Writes, named as their change events. Each is decided by the partition
// owner against the key's current state, so each is atomic without a
// read-modify-write by the client.
const (
	OpPut    Op = "put"    // PUT /v1/kv/{key}: store a value (appends set, create or cas)
	OpSet    Op = "set"    // unconditional put
	OpCreate Op = "create" // put with expectedVersion 0
	OpCAS    Op = "cas"    // put with expectedVersion > 0
	OpDelete Op = "delete"
	OpExpire Op = "expire" // the sweeper's removal of an expired entry

	OpIncrement       Op = "increment"        // counter add (kind put)
	OpPatch           Op = "patch"            // set/unset top-level fields (kind put)
	OpFieldCAS        Op = "field_cas"        // patch guarded by one field's value (kind put)
	OpLockAcquire     Op = "lock_acquire"     // take (or re-enter) a lock (kind put)
	OpLockExtend      Op = "lock_extend"      // renew a held lock (kind put)
	OpLockRelease     Op = "lock_release"     // give up a held lock (kind delete)
	OpLeaderElect     Op = "leader_elect"     // take (or renew) leadership (kind put)
	OpLeaderHeartbeat Op = "leader_heartbeat" // renew leadership (kind put)
	OpLeaderResign    Op = "leader_resign"    // give up leadership (kind delete)
	OpTouch           Op = "touch"            // a new expiry, value kept (kind put)
	// Writes of a prefix (POST /v1/kv:deleteRange, POST /v1/kv:expireDue):
	// no event is named after them; they append a delete or an expire
	// event per key (ranges.go).
	OpDeleteRange Op = "delete_range"
	OpExpireDue   Op = "expire_due"
)

// LockAction is what a lock or leader op does to the tenure of its
// holder.
type LockAction string

// Lock actions.
const (
	LockAcquire LockAction = "acquire"
	LockExtend  LockAction = "extend"
	LockRelease LockAction = "release"
)

// Entry purposes of lock-shaped keys. A lock and a leader pool behave
// alike but are told apart by semantics.purpose, so a lock is never taken
// over as a leader lease or the reverse.
const (
	PurposeLock   = "lock"
	PurposeLeader = "leader"
)

// opSpec is what the API knows of an op besides its name.
type opSpec struct {
	op      Op
	verb    string // the custom method's verb: /v1/kv/{key}:{verb}
	read    bool
	purpose string     // lock-shaped and collection ops: the purpose of their entries
	lock    LockAction // lock-shaped writes: what they do
}

// opTable lists the ops with their verbs, in the order messages name
// them. A new custom method is one row here and one in api's handler
// table.
var opTable = []opSpec{
	{op: OpGet, read: true},
	{op: OpPut}, {op: OpSet}, {op: OpCreate}, {op: OpCAS}, {op: OpDelete}, {op: OpExpire},
	{op: OpPatch}, {op: OpFieldCAS},
	{op: OpIncrement, verb: "increment"},
	{op: OpTouch, verb: "touch"},
	{op: OpDeleteRange}, {op: OpExpireDue},
	{op: OpLockAcquire, verb: "acquire", purpose: PurposeLock, lock: LockAcquire},
	{op: OpLockExtend, verb: "extend", purpose: PurposeLock, lock: LockExtend},
	{op: OpLockRelease, verb: "release", purpose: PurposeLock, lock: LockRelease},
	{op: OpLeaderElect, verb: "elect", purpose: PurposeLeader, lock: LockAcquire},
	{op: OpLeaderHeartbeat, verb: "heartbeat", purpose: PurposeLeader, lock: LockExtend},
	{op: OpLeaderResign, verb: "resign", purpose: PurposeLeader, lock: LockRelease},
	{op: OpLockCheck, verb: "lock", read: true, purpose: PurposeLock},
	{op: OpLeaderCheck, verb: "leader", read: true, purpose: PurposeLeader},
	{op: OpGetCounter, verb: "counter", read: true},
	// A verb added since the first release holds an upper-case letter:
	// keys are lower-case, so no key written before can end in it (a
	// key's last ':' segment is never a verb: SplitVerb), where ":status"
	// would have made every key ending in it invalid.
	{op: OpFieldIndexStatus, verb: "indexStatus", read: true},
	{op: OpSAdd, verb: "sadd", purpose: PurposeSet}, {op: OpSRem, verb: "srem", purpose: PurposeSet},
	{op: OpSIsMember, verb: "sismember", read: true, purpose: PurposeSet},
	{op: OpSMembers, verb: "smembers", read: true, purpose: PurposeSet},
	{op: OpSCard, verb: "scard", read: true, purpose: PurposeSet},
	{op: OpLPush, verb: "lpush", purpose: PurposeList}, {op: OpRPush, verb: "rpush", purpose: PurposeList},
	{op: OpLPop, verb: "lpop", purpose: PurposeList}, {op: OpRPop, verb: "rpop", purpose: PurposeList},
	{op: OpLTrim, verb: "ltrim", purpose: PurposeList},
	{op: OpLRange, verb: "lrange", read: true, purpose: PurposeList},
	{op: OpLLen, verb: "llen", read: true, purpose: PurposeList},
	{op: OpHistory, verb: "history", read: true},
	{op: OpQPush, verb: "qpush", purpose: PurposeQueue}, {op: OpQPop, verb: "qpop", purpose: PurposeQueue},
	{op: OpQAck, verb: "qack", purpose: PurposeQueue}, {op: OpQRequeue, purpose: PurposeQueue},
	{op: OpQExpire, purpose: PurposeQueue},
	{op: OpSessionCreate, verb: "session", purpose: PurposeSession},
	{op: OpSessionKeepAlive, verb: "keepalive", purpose: PurposeSession},
	{op: OpSessionRevoke, verb: "revoke", purpose: PurposeSession},
	{op: OpSessionAttach, purpose: PurposeSession},
	{op: OpQPeek, verb: "qpeek", read: true, purpose: PurposeQueue},
	{op: OpQSize, verb: "qsize", read: true, purpose: PurposeQueue},
}

func (o Op) spec() opSpec {
	for _, s := range opTable {
		if s.op == o {
			return s
		}
	}
	return opSpec{op: o}
}

// Verb is the op's custom method, {key}:{verb}; "" for the plain methods
// (GET, PUT, PATCH, DELETE of the key) and for ops no request names.
func (o Op) Verb() string { return o.spec().verb }

// Reads reports whether the op only reads: a GET needing the read right.
func (o Op) Reads() bool { return o.spec().read }

// Purpose is the entry purpose a lock-shaped or collection op works on
// (PurposeLock, PurposeLeader, PurposeSet), or "".
func (o Op) Purpose() string { return o.spec().purpose }

// LockAction is what a lock-shaped write does, or "".
func (o Op) LockAction() LockAction { return o.spec().lock }

// Ops lists every op, in the order of the op table (the order messages
// name them in).
func Ops() []Op {
	out := make([]Op, len(opTable))
	for i, s := range opTable {
		out[i] = s.op
	}
	return out
}

// IsVerb reports whether s names a custom method, read or write.
func IsVerb(s string) bool {
	for _, o := range opTable {
		if o.verb != "" && o.verb == s {
			return true
		}
	}
	return false
}

// SplitVerb cuts a custom method's ":verb" off the path of
// /v1/kv/{key}:{verb}. A key may hold ':' in its path (user:alice), so
// the suffix after the last ':' is a verb only when it is a known verb
// name; ParseKey refuses a key whose last ':' suffix is one, so the
// split is never ambiguous. Otherwise the whole path is the key.
func SplitVerb(raw string) (key, verb string) {
	if i := strings.LastIndexByte(raw, ':'); i >= 0 && IsVerb(raw[i+1:]) {
		return raw[:i], raw[i+1:]
	}
	return raw, ""
}

// orList joins items as "a, b or c".
func orList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
}
