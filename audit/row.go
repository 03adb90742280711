package audit

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// Row is one row of audit_events: an applied event of kv.changes, with
// hashes in place of its values and its link in the key's hash chain.
type Row struct {
	TS          time.Time // microsecond precision, UTC
	Tenant      string
	Project     string
	Key         string
	Version     int64
	PrevVersion int64
	Kind        string
	Op          string
	Origin
	TTLSeconds  int64
	ExpiresAtUS int64 // Unix microseconds; 0 when the entry has no expiry
	BeforeHash  string
	AfterHash   string
	HashKeyID   string
	// HashScheme is the scheme of the row's hashes; verification
	// recomputes them under it.
	HashScheme Scheme
	// PrevChainHash is the ChainHash of the key's row at PrevVersion, or
	// "" when there is none: version 1, or a key whose earlier versions
	// were compacted out of kv.changes before the auditor read them (a
	// chain start).
	PrevChainHash string
	ChainHash     string
	Partition     int32
	Offset        int64
	// TxnID links the rows of one eskv transaction (the event's txnId),
	// TxnSize of them; "" and 0 for a single write.
	TxnID   string
	TxnSize int32
	// ElementOp and ElementHash are the element change of a collection's
	// event (a set's sadd or srem, a list's push or pop): add or remove,
	// and the set's member or the list's value hashed like a value; ""
	// for every other event (and a list's ltrim).
	ElementOp   string
	ElementHash string
}

// Origin is who wrote, or tried to write, and with what semantics: the
// columns audit_events and audit_conflicts share.
type Origin struct {
	Purpose       string
	Producer      string
	ConsumerHints []string // [] when the write named none, never nil
	Principal     string
	// Directive is the directive the write was made for (the event's or
	// conflict record's directive; "" when it named none, and in every
	// row written before migration 0006).
	Directive string
	RequestID string
	SpecRef   string
}

func originOf(s contract.Semantics, principal, directive, requestID, specRef string) Origin {
	o := Origin{Purpose: s.Purpose, Producer: s.Producer, ConsumerHints: s.ConsumerHints,
		Principal: principal, Directive: directive, RequestID: requestID, SpecRef: specRef}
	if o.ConsumerHints == nil {
		o.ConsumerHints = []string{}
	}
	return o
}

// ConflictRow is one row of audit_conflicts: a rejected write of
// kv.conflicts, with hashes in place of the attempted and current values.
// A denied write (reason forbidden) carries no value: both hashes are
// empty, never the hash of null.
type ConflictRow struct {
	TS         time.Time
	ConflictID string
	Tenant     string
	Project    string
	Key        string
	Op         string
	Reason     string
	Origin
	ExpectedVersion int64
	CurrentVersion  int64
	AttemptedHash   string
	CurrentHash     string
	HashKeyID       string
	HashScheme      Scheme
	Partition       int32
	Offset          int64
	// TxnID is set when the rejected write was a transaction: the one
	// record of it, naming its first failing operation TxnOp (an index
	// from 0; -1 for a single write) of TxnSize.
	TxnID   string
	TxnOp   int32
	TxnSize int32
}

// elementOp is the element_op of e's row: add or remove, and for a queue
// item the state it enters (ready, inflight, done; remove when its row is
// deleted), so the trail follows an item through its deliveries (the
// row's op says which write: qpush, qpop, qack, qrequeue, qexpire).
func elementOp(e *contract.Event) string {
	if e.Op.IsQueueWrite() && e.Element.State != "" {
		return e.Element.State
	}
	return e.Element.Op
}

// At is where a record is in its topic.
type At struct {
	Partition int32
	Offset    int64
}

// EventRow returns the row of event e, read at at, hashed under k in
// scheme s and chained to prevChain (the chain hash of the key's row at
// e.PrevVersion, or "" when there is none).
func EventRow(e *contract.Event, at At, k HMACKey, s Scheme, prevChain string) Row {
	return newHasher(k).eventRow(e, at, s, prevChain, "")
}

// eventRow is EventRow under h.k; beforeHash is the hash of e.Before when
// the caller knows it, else "".
func (h *hasher) eventRow(e *contract.Event, at At, s Scheme, prevChain, beforeHash string) Row {
	k := h.k
	if beforeHash == "" {
		beforeHash = h.valueHash(s, e.Key, e.Before)
	}
	tenant, project := tenantProject(e.Key)
	r := Row{
		TS:            e.TS.UTC().Truncate(time.Microsecond),
		Tenant:        tenant,
		Project:       project,
		Key:           e.Key,
		Version:       e.Version,
		PrevVersion:   e.PrevVersion,
		Kind:          string(e.Kind),
		Op:            string(e.Op),
		Origin:        originOf(e.Semantics, e.Principal, e.Directive, e.RequestID, e.SpecRef),
		TTLSeconds:    e.Semantics.TTLSeconds,
		BeforeHash:    beforeHash,
		AfterHash:     h.valueHash(s, e.Key, e.After),
		HashKeyID:     k.ID,
		HashScheme:    s,
		PrevChainHash: prevChain,
		Partition:     at.Partition,
		Offset:        at.Offset,
		TxnID:         e.TxnID,
		TxnSize:       int32(e.TxnSize),
	}
	if e.ExpiresAt != nil {
		r.ExpiresAtUS = e.ExpiresAt.UnixMicro()
	}
	if e.Element != nil {
		// A set's member, or a list's value (pushed or popped: its
		// position is not data), hashed like a value, never stored.
		hashed := e.Element.Value
		if hashed == nil {
			hashed, _ = contract.EncodeJSON(e.Element.Member)
		}
		r.ElementOp, r.ElementHash = elementOp(e), h.valueHash(s, e.Key, hashed)
	}
	r.ChainHash = h.chainHash(&r)
	return r
}

// ConflictRowOf returns the row of conflict c, read at at, hashed under k
// in scheme s.
func ConflictRowOf(c *decide.Conflict, at At, k HMACKey, s Scheme) ConflictRow {
	return newHasher(k).conflictRow(c, at, s)
}

// conflictRow is ConflictRowOf under h.k.
func (h *hasher) conflictRow(c *decide.Conflict, at At, s Scheme) ConflictRow {
	k := h.k
	tenant, project := tenantProject(c.Key)
	r := ConflictRow{
		TS:              c.TS.UTC().Truncate(time.Microsecond),
		ConflictID:      c.ID,
		Tenant:          tenant,
		Project:         project,
		Key:             c.Key,
		Op:              string(c.Op),
		Reason:          c.Reason,
		Origin:          originOf(c.Semantics, c.Principal, c.Directive, c.RequestID, c.SpecRef),
		ExpectedVersion: c.ExpectedVersion,
		CurrentVersion:  c.CurrentVersion,
		AttemptedHash:   h.valueHash(s, c.Key, c.Attempted),
		CurrentHash:     h.valueHash(s, c.Key, c.Current),
		HashKeyID:       k.ID,
		HashScheme:      s,
		Partition:       at.Partition,
		Offset:          at.Offset,
		TxnID:           c.TxnID,
		TxnOp:           -1,
		TxnSize:         int32(c.TxnSize),
	}
	if c.TxnOp != nil {
		r.TxnOp = int32(*c.TxnOp)
	}
	if c.Reason == decide.ReasonForbidden {
		// A denial is not a rejected value: nothing was read or compared.
		r.AttemptedHash, r.CurrentHash = "", ""
	}
	return r
}

// chainInput is what a chain hash covers: every column of audit_events
// except ts (ts_us holds it exactly), chain_hash itself, the Kafka
// coordinates (where the event is stored, not what it says), ingested_at
// and, in scheme 1, hash_scheme. txn_id and txn_size are members only
// when the row belongs to a transaction, element_op and element_hash only
// when it changed an element of a collection, directive only when the
// write named one: the rows of single writes, every
// row written before transactions existed among them, hash exactly as
// before, in both schemes, while moving a row into or out of a
// transaction breaks its chain (and giving a row a directive, or taking
// its directive away, breaks it too). Member names are the column names, so an
// auditor can rebuild it from a row: scheme 1 with any RFC 8785
// implementation, scheme 2 the same way with integers written exactly.
type chainInput struct {
	TSUS          int64    `json:"ts_us"`
	Tenant        string   `json:"tenant"`
	Project       string   `json:"project"`
	Key           string   `json:"key"`
	Version       int64    `json:"version"`
	PrevVersion   int64    `json:"prev_version"`
	Kind          string   `json:"kind"`
	Op            string   `json:"op"`
	Purpose       string   `json:"purpose"`
	Producer      string   `json:"producer"`
	ConsumerHints []string `json:"consumer_hints"`
	Principal     string   `json:"principal"`
	Directive     string   `json:"directive,omitempty"`
	RequestID     string   `json:"request_id"`
	SpecRef       string   `json:"spec_ref"`
	TTLSeconds    int64    `json:"ttl_seconds"`
	ExpiresAtUS   int64    `json:"expires_at_us"`
	BeforeHash    string   `json:"before_hash"`
	AfterHash     string   `json:"after_hash"`
	HashKeyID     string   `json:"hash_key_id"`
	HashScheme    Scheme   `json:"hash_scheme,omitempty"` // 0 (absent) in scheme 1
	PrevChainHash string   `json:"prev_chain_hash"`
	TxnID         string   `json:"txn_id,omitempty"`
	TxnSize       int32    `json:"txn_size,omitempty"`
	ElementOp     string   `json:"element_op,omitempty"`
	ElementHash   string   `json:"element_hash,omitempty"`
}

// ChainInput returns the bytes a row's chain hash is the HMAC of: the
// canonical JSON, in the row's scheme, of an object of the row's columns
// (see docs/audit.md); nil for a scheme this package does not know.
func ChainInput(r *Row) []byte {
	if !r.HashScheme.Valid() {
		return nil
	}
	return appendChainInput(make([]byte, 0, 640), r)
}

// appendChainInput appends ChainInput(r) to b; r's scheme is valid.
func appendChainInput(b []byte, r *Row) []byte {
	in := r.chainInput()
	if out, ok := in.appendCanonical(b); ok {
		return out
	}
	return append(b, in.canonicalSlow()...)
}

func (r *Row) chainInput() chainInput {
	in := chainInput{
		TSUS: r.TS.UnixMicro(), Tenant: r.Tenant, Project: r.Project, Key: r.Key,
		Version: r.Version, PrevVersion: r.PrevVersion, Kind: r.Kind, Op: r.Op,
		Purpose: r.Purpose, Producer: r.Producer, ConsumerHints: r.ConsumerHints,
		Principal: r.Principal, Directive: r.Directive, RequestID: r.RequestID, SpecRef: r.SpecRef,
		TTLSeconds: r.TTLSeconds, ExpiresAtUS: r.ExpiresAtUS,
		BeforeHash: r.BeforeHash, AfterHash: r.AfterHash, HashKeyID: r.HashKeyID,
		PrevChainHash: r.PrevChainHash, TxnID: r.TxnID, TxnSize: r.TxnSize,
		ElementOp: r.ElementOp, ElementHash: r.ElementHash,
	}
	if r.HashScheme != Scheme1 {
		in.HashScheme = r.HashScheme
	}
	if in.ConsumerHints == nil {
		in.ConsumerHints = []string{}
	}
	return in
}

// canonicalSlow is the definition: encoding/json, then RFC 8785 (scheme
// 1) or CanonicalExact (scheme 2).
func (in chainInput) canonicalSlow() []byte {
	b, err := json.Marshal(in)
	if err != nil {
		panic(fmt.Sprintf("audit: marshal chain input: %v", err)) // strings and integers only
	}
	if in.HashScheme == Scheme2 {
		c, ok := CanonicalExact(b)
		if !ok {
			panic("audit: canonicalize chain input: no canonical form") // valid UTF-8, no duplicates
		}
		return c
	}
	c, err := jcs.Transform(b)
	if err != nil {
		// Strings are valid UTF-8 after json.Marshal and numbers are
		// integers: JCS cannot fail on this object.
		panic(fmt.Sprintf("audit: canonicalize chain input: %v", err))
	}
	return c
}

// maxExactInt is the largest integer an IEEE 754 double holds exactly; RFC
// 8785 serializes numbers as doubles.
const maxExactInt = 1 << 53

// appendCanonical appends the canonical form of in to b directly
// (members in the order of their ASCII names, strings escaped as
// ECMAScript's JSON.stringify does), the same bytes as canonicalSlow,
// about twenty times faster. ok is false in scheme 1 when an integer is
// beyond 2^53, where the double rounding of RFC 8785 applies: the caller
// takes the slow path. Scheme 2 writes every int64 exactly.
func (in chainInput) appendCanonical(b []byte) (_ []byte, ok bool) {
	for _, n := range []int64{in.ExpiresAtUS, in.PrevVersion, in.TSUS, in.TTLSeconds, in.Version} {
		if in.HashScheme == 0 && (n > maxExactInt || n < -maxExactInt) {
			return nil, false
		}
	}
	str := func(name, v string) {
		b = append(b, name...)
		b = appendJCSString(b, v)
	}
	num := func(name string, v int64) {
		b = append(b, name...)
		b = strconv.AppendInt(b, v, 10)
	}
	str(`{"after_hash":`, in.AfterHash)
	str(`,"before_hash":`, in.BeforeHash)
	b = append(b, `,"consumer_hints":[`...)
	for i, h := range in.ConsumerHints {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJCSString(b, h)
	}
	b = append(b, ']')
	if in.Directive != "" {
		str(`,"directive":`, in.Directive)
	}
	if in.ElementOp != "" {
		str(`,"element_hash":`, in.ElementHash)
		str(`,"element_op":`, in.ElementOp)
	}
	num(`,"expires_at_us":`, in.ExpiresAtUS)
	str(`,"hash_key_id":`, in.HashKeyID)
	if in.HashScheme != 0 {
		num(`,"hash_scheme":`, int64(in.HashScheme))
	}
	str(`,"key":`, in.Key)
	str(`,"kind":`, in.Kind)
	str(`,"op":`, in.Op)
	str(`,"prev_chain_hash":`, in.PrevChainHash)
	num(`,"prev_version":`, in.PrevVersion)
	str(`,"principal":`, in.Principal)
	str(`,"producer":`, in.Producer)
	str(`,"project":`, in.Project)
	str(`,"purpose":`, in.Purpose)
	str(`,"request_id":`, in.RequestID)
	str(`,"spec_ref":`, in.SpecRef)
	str(`,"tenant":`, in.Tenant)
	num(`,"ts_us":`, in.TSUS)
	num(`,"ttl_seconds":`, in.TTLSeconds)
	if in.TxnID != "" {
		str(`,"txn_id":`, in.TxnID)
	}
	if in.TxnSize != 0 {
		num(`,"txn_size":`, int64(in.TxnSize))
	}
	num(`,"version":`, in.Version)
	return append(b, '}'), true
}

// appendJCSString appends s as an RFC 8785 string: '"' and '\\' escaped,
// control characters as \b \t \n \f \r or \u00xx, everything else as
// UTF-8; invalid UTF-8 becomes U+FFFD, as encoding/json makes it.
func appendJCSString(b []byte, s string) []byte {
	b = append(b, '"')
	// The run of printable ASCII that needs no escape, copied at once:
	// most strings of a row are nothing else.
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < utf8.RuneSelf && s[i] != '"' && s[i] != '\\' {
		i++
	}
	b = append(b, s[:i]...)
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			b = appendJCSByte(b, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// appendJCSByte appends the ASCII character c as RFC 8785 writes it in a
// string: '"' and '\\' escaped, control characters as \b \t \n \f \r or
// \u00xx, anything else as itself.
func appendJCSByte(b []byte, c byte) []byte {
	switch {
	case c == '"' || c == '\\':
		return append(b, '\\', c)
	case c >= 0x20:
		return append(b, c)
	case c == '\b':
		return append(b, '\\', 'b')
	case c == '\t':
		return append(b, '\\', 't')
	case c == '\n':
		return append(b, '\\', 'n')
	case c == '\f':
		return append(b, '\\', 'f')
	case c == '\r':
		return append(b, '\\', 'r')
	}
	return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

const hexDigits = "0123456789abcdef"

// ChainHash returns the hex HMAC-SHA256, under k, of ChainInput(r). It
// covers the row's fields and its link to the previous row of the key, so
// altering a row changes its chain hash and deleting one breaks the link
// of the next. It is "" for a row of a scheme this package does not know.
func ChainHash(k HMACKey, r *Row) string {
	return newHasher(k).chainHash(r)
}

// chainHash is ChainHash under h.k.
func (h *hasher) chainHash(r *Row) string {
	if !r.HashScheme.Valid() {
		return ""
	}
	h.buf = appendChainInput(h.buf[:0], r)
	return h.hex(h.buf)
}

// tenantProject returns the tenant and project of a key
// tenant/<tenant>/project/<project>/<path>; parts it lacks are "".
func tenantProject(key string) (tenant, project string) {
	// The parts of strings.SplitN(key, "/", 5), without its slice.
	p0, rest, ok := strings.Cut(key, "/")
	if !ok {
		return "", ""
	}
	p1, rest, ok := strings.Cut(rest, "/")
	if p0 == "tenant" {
		tenant = p1
	}
	if !ok {
		return tenant, ""
	}
	p2, rest, ok := strings.Cut(rest, "/")
	if !ok {
		return tenant, ""
	}
	if p3, _, _ := strings.Cut(rest, "/"); p2 == "project" {
		project = p3
	}
	return tenant, project
}
