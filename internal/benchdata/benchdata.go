// Package benchdata holds the events benchmarks of several packages build
// alike: what figure 18a of eskvbench writes, for the projector's and the
// projection's work per event.
package benchdata

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/eskv/eskv/contract"
)

// CAS18aEvent is the event figure 18a makes of a write to key k (of 64,
// over 8 projects) at version v, at ts plus k µs: a compare-and-swap from
// {"client":k,"seq":v-2} to {"client":k,"seq":v-1}.
func CAS18aEvent(k int, v int64, ts time.Time) contract.Event {
	return contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           fmt.Sprintf("tenant/bench/project/p%d/cas18a-k%03d", k%8, k),
		Scope:         fmt.Sprintf("tenant/bench/project/p%d", k%8),
		Version:       v,
		PrevVersion:   v - 1,
		Kind:          contract.KindPut,
		Op:            contract.OpCAS,
		Before:        json.RawMessage(fmt.Sprintf(`{"client":%d,"seq":%d}`, k, v-2)),
		After:         json.RawMessage(fmt.Sprintf(`{"client":%d,"seq":%d}`, k, v-1)),
		CreatedAt:     ts.Add(-time.Hour),
		Semantics:     contract.Semantics{Purpose: "other"},
		RequestDigest: "sha256:5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
		Principal:     "bench",
		TS:            ts.Add(time.Duration(k) * time.Microsecond),
		WriterEpoch:   3,
	}
}
