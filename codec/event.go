// Package codec is eskv's hand-written JSON on every write's path: the
// kv.changes event's encoding and decoding (MarshalEvent,
// UnmarshalRecord), the PUT body's fast decode (DecodePutBody), and the
// checks and compaction a value passes before it is stored or answered
// (CompactValue, AppendCompact, ScanValue). The writer encodes each event
// and decodes each PUT, the projector and the auditor decode each event,
// where encoding/json's reflection cost a measurable share of the CPU
// (docs/performance.md). All of it reads JSON with one scanner
// (decode.go); a value's strict checks (duplicate members, UTF-8,
// surrogates) are jsontext's. The contract says what the JSON means;
// this package only reads and writes it, so clients never import it.
package codec

import (
	"fmt"

	"github.com/eskv/eskv/contract"
)

// MarshalEvent encodes the event as the JSON value of its Kafka record,
// the bytes contract.EncodeJSON(e) writes (encode.go). Values keep their
// bytes: json.Marshal would rewrite <, > and & in them as \u003c, \u003e
// and \u0026 (up to six times the size).
func MarshalEvent(e *contract.Event) ([]byte, error) {
	n := 384 + len(e.Key) + len(e.Scope) + len(e.Before) + len(e.After) + len(e.Principal) + len(e.Directive) + len(e.RequestID) + len(e.SpecRef)
	if e.Element != nil {
		n += 192 + len(e.Element.Member) + len(e.Element.Value)
	}
	return appendEvent(make([]byte, 0, n), e)
}

// UnmarshalEvent decodes a record value into an event and checks the
// fields every consumer relies on.
func UnmarshalEvent(b []byte) (contract.Event, error) {
	e, _, err := UnmarshalRecord(b)
	return e, err
}

// UnmarshalRecord is UnmarshalEvent, and reports whether b is verbatim:
// it says as JSON what the event's encoding (MarshalEvent) says, up to
// whitespace and the escaping of strings. A record an eskv writer
// appended always is (it is the event's encoding); b is not when it has
// a member Event does not know, a member twice, a name in other case, a
// null, empty or zero member the encoding would leave out or write
// otherwise, a time or an integer written in another form, a string
// read with U+FFFD, or anything after the event. A store of JSON values
// may keep a verbatim b instead of encoding the event again.
func UnmarshalRecord(b []byte) (e contract.Event, verbatim bool, err error) {
	verbatim, err = decodeEvent(b, &e)
	if err != nil {
		return contract.Event{}, false, fmt.Errorf("decode event: %w", err)
	}
	if e.Key == "" || e.Version < 1 || e.PrevVersion >= e.Version {
		return contract.Event{}, false, fmt.Errorf("decode event: key %q version %d prevVersion %d is not a valid identity", e.Key, e.Version, e.PrevVersion)
	}
	switch e.Kind {
	case contract.KindPut, contract.KindDelete, contract.KindExpire:
	default:
		return contract.Event{}, false, fmt.Errorf("decode event %s@%d: unknown kind %q", e.Key, e.Version, e.Kind)
	}
	return e, verbatim, nil
}
