package writer

import (
	"crypto/rand"
	"encoding/hex"

	"github.com/eskv/eskv/contract"
)

// Queues (docs/collections.md "Queues", events/queue.go). A queue's
// metadata holds its size, since and in-flight count; each item is one
// kv_elements row (member contract.QueueMember: incarnation, priority,
// push version). Every queue write is decided on the metadata and at
// most one item: a push on the item with its dedupId (if any), a pop on
// the queue's first ready item, an ack or the sweeper's requeue on the
// item its receipt names. Each appends one event carrying the item's
// full new state (contract.Element.State ...), or nothing.

// newReceiptNonce is a receipt's random part: 128 bits from crypto/rand,
// in lowercase hex (contract.IsReceiptNonce).
func newReceiptNonce() string {
	var b [contract.ReceiptNonceLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand crashes the program instead
	return hex.EncodeToString(b[:])
}
