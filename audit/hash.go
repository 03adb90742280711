// Package audit is eskv's tamper-evident audit trail in ClickHouse: the
// hashing of values (HMAC-SHA256 of a canonical form of the value under an
// audit key, in a versioned hash scheme), the per-key hash chain, the
// ClickHouse store and its documented queries, the consumer of kv.changes
// and kv.conflicts that fills it, conflict-rate alerts, and verification
// of the trail against the log. It knows neither the writer nor the
// projection.
package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"hash"
	"strconv"

	"github.com/gowebpki/jcs"
)

// Scheme is the version of the hash scheme a row was written with: how its
// value hashes and its chain hash are computed (docs/audit.md, "Hash
// schemes"). Every row records it in its hash_scheme column, and
// verification recomputes each row under its own scheme.
type Scheme uint8

const (
	// Scheme1 hashes RFC 8785 canonical JSON, whose numbers are IEEE 754
	// doubles: 2^53 and 2^53+1, or 0, -0 and 1e-400, hash alike, and equal
	// values hash alike under every key. Rows written before hash_scheme
	// existed are scheme 1; no new row is.
	Scheme1 Scheme = 1
	// Scheme2 hashes CanonicalExact (every number by its exact decimal
	// value and sign) after the entry's key, and chains hash_scheme too.
	Scheme2 Scheme = 2
	// CurrentScheme is the scheme of new rows.
	CurrentScheme = Scheme2
)

// Valid reports whether s is a scheme this package computes.
func (s Scheme) Valid() bool { return s == Scheme1 || s == Scheme2 }

// nonCanonicalPrefix starts the canonical bytes of a value that has no
// canonical form (duplicate object member names, and under scheme 1 a
// number outside the range of a double): such a value is hashed as the
// bytes of the event, after this prefix, so it still gets a stable hash
// that can never equal the hash of a canonical form (canonical JSON never
// starts with a NUL byte).
const nonCanonicalPrefix = "\x00eskv-noncanonical\x00"

// Canonical returns the canonical form of the JSON value raw under s: RFC
// 8785 (JCS) for Scheme1, CanonicalExact for Scheme2; an absent value (nil
// or empty) is JSON null. ok is false when raw has no canonical form, and
// then the returned bytes (nonCanonicalPrefix and raw) are what is hashed.
func (s Scheme) Canonical(raw json.RawMessage) (b []byte, ok bool) {
	if s == Scheme2 {
		return CanonicalExact(raw)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return []byte("null"), true
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return append([]byte(nonCanonicalPrefix), raw...), false
	}
	return c, true
}

// valueDomain starts the HMAC input of every scheme-2 value hash.
const valueDomain = "eskv-audit-value/2\n"

// ValueInput returns the bytes the hash of value raw of entry key is the
// HMAC of under s. Scheme1: the canonical form alone. Scheme2:
// "eskv-audit-value/2\n", the byte length of key in decimal, ":", key,
// then the canonical form — so the same value under two keys (or two
// tenants) hashes differently, and no key/value split is ambiguous.
func (s Scheme) ValueInput(key string, raw json.RawMessage) []byte {
	if s != Scheme2 {
		c, _ := s.Canonical(raw)
		return c
	}
	var c canonicalizer
	return c.appendValueInput(make([]byte, 0, len(valueDomain)+8+len(key)+len(raw)+8), key, raw)
}

// appendValueInput appends Scheme2.ValueInput(key, raw) to b.
func (c *canonicalizer) appendValueInput(b []byte, key string, raw json.RawMessage) []byte {
	b = append(b, valueDomain...)
	b = strconv.AppendInt(b, int64(len(key)), 10)
	b = append(b, ':')
	b = append(b, key...)
	b, _ = c.appendExact(b, raw)
	return b
}

// ValueHash returns the lowercase hex HMAC-SHA256, under k, of
// s.ValueInput(key, raw). Equal JSON values of one key hash equal whatever
// their formatting or member order; without the key, nothing of the value
// can be learned or brute-forced from the hash.
func (s Scheme) ValueHash(k HMACKey, key string, raw json.RawMessage) string {
	return newHasher(k).valueHash(s, key, raw)
}

// ValueHash is CurrentScheme.ValueHash: the hash a new row holds for value
// raw of entry key.
func ValueHash(k HMACKey, key string, raw json.RawMessage) string {
	return CurrentScheme.ValueHash(k, key, raw)
}

// hasher computes hashes under one key with one keyed HMAC, reset from
// hash to hash, and buffers kept from hash to hash: an HMAC and buffers
// per hash were most of the auditor's allocations (issue 16). It is not
// safe for concurrent use: one per goroutine.
type hasher struct {
	k   HMACKey
	mac hash.Hash
	buf []byte // the input of the hash being computed
	sum [sha256.Size]byte
	c   canonicalizer
}

func newHasher(k HMACKey) *hasher {
	return &hasher{k: k, mac: hmac.New(sha256.New, k.Secret), buf: make([]byte, 0, 1024)}
}

// hex returns the lowercase hex HMAC-SHA256 of b under h.k.
func (h *hasher) hex(b []byte) string {
	h.mac.Reset() // back to the keyed state
	h.mac.Write(b)
	var x [2 * sha256.Size]byte
	hex.Encode(x[:], h.mac.Sum(h.sum[:0]))
	return string(x[:])
}

// valueHash is s.ValueHash(h.k, key, raw).
func (h *hasher) valueHash(s Scheme, key string, raw json.RawMessage) string {
	if s != Scheme2 {
		c, _ := s.Canonical(raw)
		return h.hex(c)
	}
	h.buf = h.c.appendValueInput(h.buf[:0], key, raw)
	return h.hex(h.buf)
}
