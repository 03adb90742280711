package changelog

import (
	"strings"

	"github.com/eskv/eskv/contract"
)

// identity names the element an element change is about, within its
// collection: for a set, the member; for a list, the position; for a
// queue, the item (elemkey.QueueMember, stable across the item's states). It never contains NUL (contract.ValidateMember).
func identity(el *contract.Element) string { return el.Member }

// RecordKeySep separates the event key from the element identity in the
// record key of an element event. Neither a key (contract.ParseKey) nor an element
// identity (contract.ValidateMember) can contain it.
const RecordKeySep = "\x00"

// RecordKey is the Kafka record key of the event in kv.changes, the key
// the topic is compacted by: the event key, or for an element change the
// event key, NUL and the element's identity. So compaction keeps the
// latest change of every element (a removed member's remove event
// included), not only the collection's latest event, and a rebuild from
// the compacted log folds every element. The collection's newest event
// is the latest of its record key, so it always survives too: consumers
// fold by Event.Key and the version, never by the record key.
// Partitioning does not use it (the writer picks the partition by scope).
func RecordKey(e *contract.Event) string {
	if e.Element == nil {
		return e.Key
	}
	return e.Key + RecordKeySep + identity(e.Element)
}

// EventKeyOf returns the event key a record key of kv.changes names (the
// part before RecordKeySep), for filtering records by key before
// decoding them.
func EventKeyOf(recordKey []byte) string {
	k, _, _ := strings.Cut(string(recordKey), RecordKeySep)
	return k
}
