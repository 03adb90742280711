package contract

import (
	"encoding/json"
	"time"
)

// History (issue 14, part 1): GET /v1/kv/{key}:history reads the key's
// versions, oldest first, from the projection's kv_history, which keeps
// every event of the key (a delete and an expire included, so a history
// survives a re-create: versions never go back) until the projector's
// history retention removes the older ones (docs/configuration.md).

// OpHistory is the read of a key's history.
const OpHistory Op = "history" // GET /v1/kv/{key}:history?fromVersion=&limit=&cursor=

// HistoryVersion is one version of a key: the event that made it, in the
// names events.Event uses. Value is the value after the event (Event.After),
// absent when the event left the key absent (a delete, an expire, a
// lock or leader release). Principal is the entry's lastWriter at that
// version.
type HistoryVersion struct {
	Version   int64           `json:"version"`
	Kind      Kind            `json:"kind"`
	Op        Op              `json:"op"`
	Value     json.RawMessage `json:"value,omitempty"`
	Principal string          `json:"principal"`
	RequestID string          `json:"requestId,omitempty"`
	TS        time.Time       `json:"ts"`
	ExpiresAt *time.Time      `json:"expiresAt,omitempty"`
	TxnID     string          `json:"txnId,omitempty"`
	// Element is the element change of a collection's event (a set's
	// member, a list's pushed or popped value).
	Element *Element `json:"element,omitempty"`
}

// HistoryAnswer is a page of GET :history: versions oldest first from the
// request's fromVersion (or cursor); Cursor, when set, continues after the
// last one (ask again with cursor=Cursor).
type HistoryAnswer struct {
	Key      string           `json:"key"`
	Versions []HistoryVersion `json:"versions"`
	Cursor   string           `json:"cursor,omitempty"`
	// Position is the log position the answer reflects (a watch cursor,
	// p<partition>.o<offset>): every event of the key's partition up to
	// it and none after. Watching after it delivers exactly the later
	// changes.
	Position string `json:"position,omitempty"`
}
