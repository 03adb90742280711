// Package audit is eskv's tamper-evident audit trail in ClickHouse: the
// hashing of values (HMAC-SHA256 over RFC 8785 canonical JSON under an
// audit key), the per-key hash chain, the ClickHouse store and its
// documented queries, the consumer of kv.changes and kv.conflicts that
// fills it, conflict-rate alerts, and verification of the trail against
// the log. It knows neither the writer nor the projection.
package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"github.com/gowebpki/jcs"
)

// nonCanonicalPrefix starts the HMAC input of a value that has no RFC
// 8785 form (duplicate object member names, or a number outside the range
// of an IEEE 754 double): such a value is hashed as the bytes of the
// event, after this prefix, so it still gets a stable hash that can never
// equal the hash of a canonical form (canonical JSON never starts with a
// NUL byte).
const nonCanonicalPrefix = "\x00eskv-noncanonical\x00"

// Canonical returns the RFC 8785 (JCS) form of the JSON value raw; an
// absent value (nil or empty) is JSON null. ok is false when raw has no
// canonical form, and then the returned bytes are what ValueHash hashes.
func Canonical(raw json.RawMessage) (b []byte, ok bool) {
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

// ValueHash returns the lowercase hex HMAC-SHA256, under k, of the
// canonical JSON of raw (see Canonical). Equal JSON values hash equal
// whatever their formatting or member order; without the key, nothing of
// the value can be learned or brute-forced from the hash.
func ValueHash(k HMACKey, raw json.RawMessage) string {
	c, _ := Canonical(raw)
	return mac(k, c)
}

func mac(k HMACKey, b []byte) string {
	m := hmac.New(sha256.New, k.Secret)
	m.Write(b)
	var sum [sha256.Size]byte
	return hex.EncodeToString(m.Sum(sum[:0]))
}
