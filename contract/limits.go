package contract

import (
	"strings"
	"unicode/utf8"
)

// Limits of the API's inputs. They are part of the API: the server
// enforces them (invalid, naming the field) and clients may check them
// first. The key length is MaxKeyLen; the value size is a server setting
// whose default is DefaultMaxValueBytes.
const (
	// DefaultMaxValueBytes is the default limit on a serialized value.
	DefaultMaxValueBytes = 64 << 10
	// MaxTTLSeconds bounds every TTL and lease: ten years.
	MaxTTLSeconds = 10 * 365 * 24 * 3600
	// DefaultLockTTLSeconds is the lease of a lock or leadership when the
	// request gives none.
	DefaultLockTTLSeconds = 60

	// DefaultListLimit and MaxListLimit bound a page of a listing.
	DefaultListLimit = 100
	MaxListLimit     = 1000

	MaxRequestIDLen    = 128 // requestId, in bytes
	MaxSpecRefLen      = 512 // specRef, in bytes
	MaxProducerLen     = 128 // semantics.producer, in bytes
	MaxConsumerHints   = 32  // semantics.consumerHints
	MaxConsumerHintLen = 128 // each consumer hint, in bytes
	MaxHolderLen       = 256 // a lock holder or leader candidate, in bytes

	// MaxFieldNameBytes is the longest top-level field name a patch,
	// a field read or a filter takes (and the longest the projection
	// indexes).
	MaxFieldNameBytes = 256
	// MaxPatchFields is how many fields one patch sets and unsets.
	MaxPatchFields = 256

	// MaxTxnOps is how many operations one transaction (POST /v1/txn)
	// takes.
	MaxTxnOps = 100
)

// checkText rejects strings Postgres jsonb cannot store: invalid UTF-8
// and NUL characters.
func checkText(field, s string) error {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return FieldErrorf(EInvalid, field, "%s must be valid UTF-8 without NUL characters", field)
	}
	return nil
}

// checkCommon checks the fields most writes share.
func checkCommon(expected *int64, requestID, specRef string) error {
	if err := checkText("requestId", requestID); err != nil {
		return err
	}
	if err := checkText("specRef", specRef); err != nil {
		return err
	}
	if expected != nil && *expected < 0 {
		return FieldErrorf(EInvalid, "expectedVersion", "expectedVersion must be 0 (must not exist) or a positive version")
	}
	if len(requestID) > MaxRequestIDLen {
		return FieldErrorf(EInvalid, "requestId", "requestId is longer than %d characters", MaxRequestIDLen)
	}
	if len(specRef) > MaxSpecRefLen {
		return FieldErrorf(EInvalid, "specRef", "specRef is longer than %d characters", MaxSpecRefLen)
	}
	return nil
}

// ValidateFieldName checks a top-level field name given as where (set,
// unset, if.field, field).
func ValidateFieldName(where, f string) error {
	if f == "" || len(f) > MaxFieldNameBytes {
		return FieldErrorf(EInvalid, where, "field names must be 1 to %d bytes", MaxFieldNameBytes)
	}
	return checkText(where, f)
}

// validate checks semantics as a request gives them; an empty purpose
// stands for "other" (withDefaults).
func (s Semantics) validate() error {
	s = s.withDefaults()
	ok := false
	for _, p := range Purposes {
		ok = ok || p == s.Purpose
	}
	if !ok {
		return FieldErrorf(EInvalid, "semantics.purpose", "purpose %q is not one of %v", s.Purpose, Purposes)
	}
	if err := checkText("semantics.producer", s.Producer); err != nil {
		return err
	}
	for _, h := range s.ConsumerHints {
		if err := checkText("semantics.consumerHints", h); err != nil {
			return err
		}
	}
	if len(s.Producer) > MaxProducerLen {
		return FieldErrorf(EInvalid, "semantics.producer", "producer is longer than %d characters", MaxProducerLen)
	}
	if len(s.ConsumerHints) > MaxConsumerHints {
		return FieldErrorf(EInvalid, "semantics.consumerHints", "at most %d consumer hints", MaxConsumerHints)
	}
	for _, h := range s.ConsumerHints {
		if h == "" || len(h) > MaxConsumerHintLen {
			return FieldErrorf(EInvalid, "semantics.consumerHints", "each consumer hint must be 1 to %d characters", MaxConsumerHintLen)
		}
	}
	if s.TTLSeconds < 0 {
		return FieldErrorf(EInvalid, "semantics.ttlSeconds", "ttlSeconds must be positive")
	}
	return nil
}

// withDefaults returns s with the default purpose, other, when it has
// none.
func (s Semantics) withDefaults() Semantics {
	if s.Purpose == "" {
		s.Purpose = "other"
	}
	return s
}
