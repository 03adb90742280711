package contract

// Writes of a prefix: a range delete (POST /v1/kv:deleteRange, etcd's
// del --prefix, Consul's kv delete -recurse) and the expiry now of what
// is due under a prefix (POST /v1/kv:expireDue). A prefix lies inside one
// project (ValidatePrefix), so inside one partition: its owner decides
// the whole write, against the projection's keys under the prefix and
// its overlay's unprojected writes, in one Kafka transaction.

// MaxRangeKeys bounds what one range delete or expireDue call removes:
// that many keys in one Kafka transaction at most. A range delete of
// more keys is refused too_many_keys unless it asks for the chunked
// mode, which deletes the first MaxRangeKeys and answers truncated. The
// partition's byte budget of one transaction bounds them too (their
// events carry the values deleted): over it an atomic range delete is
// refused value_too_large, and a chunk stops short.
const MaxRangeKeys = 1000

// DeleteRangeBody is the body of POST /v1/kv:deleteRange: delete every
// key under Prefix (string prefix, inside one project), whatever it is
// for (a lock or a leadership is broken as a DELETE naming its version
// breaks it; a set, list or queue goes whole), as a transaction's delete
// events (one txnId, txnSize the count).
type DeleteRangeBody struct {
	Prefix string `json:"prefix"`
	// Chunked deletes at most MaxRangeKeys keys, the first in key order
	// after Cursor, and answers truncated when more may follow;
	// without it a prefix over MaxRangeKeys keys is refused whole.
	Chunked bool `json:"chunked,omitempty"`
	// Cursor is a chunked answer's nextCursor: the keys up to it were
	// the previous chunk's. Only with Chunked.
	Cursor string `json:"cursor,omitempty"`
}

// Validate checks the body.
func (b *DeleteRangeBody) Validate() error {
	return validateRange(b.Prefix, b.Cursor, b.Chunked)
}

// validateRange checks a prefix write's prefix and cursor.
func validateRange(prefix, cursor string, chunked bool) error {
	if err := ValidatePrefix(prefix); err != nil {
		return err
	}
	switch {
	case cursor == "":
	case !chunked:
		return FieldErrorf(EInvalid, "cursor", "cursor continues a chunked call: give chunked too")
	case len(cursor) <= len(prefix) || cursor[:len(prefix)] != prefix:
		return FieldErrorf(EInvalid, "cursor", "cursor %q is not a key under prefix %s", cursor, prefix)
	}
	return nil
}

// PrefixAnswer answers a range delete or an expireDue: how many keys it
// removed and, for a chunked call, whether more may be left (Truncated)
// and where the next call continues (NextCursor).
type PrefixAnswer struct {
	Prefix string `json:"prefix"`
	// Count is the number of keys deleted (or expired).
	Count      int    `json:"count"`
	Truncated  bool   `json:"truncated"`
	NextCursor string `json:"nextCursor,omitempty"`
	// TxnID is the id of a range delete's events (their txnId), when it
	// deleted any.
	TxnID string `json:"txnId,omitempty"`
}

// ExpireDueBody is the body of POST /v1/kv:expireDue: expire now the
// keys under Prefix past their expiresAt, with the expire events the
// sweeper appends, at most MaxRangeKeys of them, the first in key order
// after Cursor (always chunked: the sweeper expires the rest anyway).
type ExpireDueBody struct {
	Prefix string `json:"prefix"`
	Cursor string `json:"cursor,omitempty"`
}

// Validate checks the body.
func (b *ExpireDueBody) Validate() error { return validateRange(b.Prefix, b.Cursor, true) }
