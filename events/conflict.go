package events

import (
	"encoding/json"
	"time"
)

// Conflict is a rejected compare-and-swap, as recorded in kv.conflicts for
// conflict-rate analytics. It never enters kv.changes.
type Conflict struct {
	SchemaVersion   int             `json:"schemaVersion"`
	ID              string          `json:"id"` // correlation id, also in the WARN log and the 409 answer
	Key             string          `json:"key"`
	Scope           string          `json:"scope"`
	Op              Op              `json:"op"`
	ExpectedVersion int64           `json:"expectedVersion"`
	CurrentVersion  int64           `json:"currentVersion"`
	Attempted       json.RawMessage `json:"attempted"`
	Current         json.RawMessage `json:"current"`
	Semantics       Semantics       `json:"semantics"`
	SpecRef         string          `json:"specRef,omitempty"`
	RequestID       string          `json:"requestId,omitempty"`
	Principal       string          `json:"principal"`
	TS              time.Time       `json:"ts"`
	Reason          string          `json:"reason"` // version_mismatch | request_id_reused
}
