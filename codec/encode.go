package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/eskv/eskv/contract"
)

// The event's JSON is written here without reflection: every appended
// event is encoded once by the writer and once more by the projector for
// kv_history, and encoding/json's reflection over Event was about 5 % of
// the projector's CPU (docs/performance.md). The bytes are the ones
// EncodeJSON(e) writes, field for field: the auditor's hash chain and
// logcheck compare them, so codec_test.go proves the identity by a table
// and a fuzz target against encoding/json.

// appendEvent appends e's JSON as EncodeJSON writes it: Event's field
// order and omitempty, no HTML escaping, values compacted.
func appendEvent(b []byte, e *contract.Event) ([]byte, error) {
	b = strconv.AppendInt(append(b, `{"schemaVersion":`...), int64(e.SchemaVersion), 10)
	b = AppendJSONString(append(b, `,"key":`...), e.Key)
	b = AppendJSONString(append(b, `,"scope":`...), e.Scope)
	b = strconv.AppendInt(append(b, `,"version":`...), e.Version, 10)
	b = strconv.AppendInt(append(b, `,"prevVersion":`...), e.PrevVersion, 10)
	b = AppendJSONString(append(b, `,"kind":`...), string(e.Kind))
	b = AppendJSONString(append(b, `,"op":`...), string(e.Op))
	var err error
	if b, err = appendRaw(append(b, `,"before":`...), e.Before); err != nil {
		return nil, fmt.Errorf("encode event: before: %w", err)
	}
	if b, err = appendRaw(append(b, `,"after":`...), e.After); err != nil {
		return nil, fmt.Errorf("encode event: after: %w", err)
	}
	if b, err = appendTime(append(b, `,"createdAt":`...), e.CreatedAt); err != nil {
		return nil, fmt.Errorf("encode event: createdAt: %w", err)
	}
	if b, err = appendOptTime(b, `,"expiresAt":`, e.ExpiresAt); err != nil {
		return nil, fmt.Errorf("encode event: expiresAt: %w", err)
	}
	b = appendSemantics(append(b, `,"semantics":`...), &e.Semantics)
	b = appendOptString(b, `,"specRef":`, e.SpecRef)
	b = appendOptString(b, `,"requestId":`, e.RequestID)
	b = appendOptString(b, `,"requestDigest":`, e.RequestDigest)
	b = AppendJSONString(append(b, `,"principal":`...), e.Principal)
	if b, err = appendTime(append(b, `,"ts":`...), e.TS); err != nil {
		return nil, fmt.Errorf("encode event: ts: %w", err)
	}
	b = strconv.AppendInt(append(b, `,"writerEpoch":`...), e.WriterEpoch, 10)
	b = appendOptString(b, `,"txnId":`, e.TxnID)
	if e.TxnSize != 0 {
		b = strconv.AppendInt(append(b, `,"txnSize":`...), int64(e.TxnSize), 10)
	}
	if e.Element != nil {
		if b, err = appendElement(append(b, `,"element":`...), e.Element); err != nil {
			return nil, fmt.Errorf("encode event: element: %w", err)
		}
	}
	if e.Session != nil {
		b = AppendJSONString(append(b, `,"session":{"key":`...), e.Session.Key)
		b = append(appendOptString(b, `,"reason":`, e.Session.Reason), '}')
	}
	return append(b, '}'), nil
}

// appendElement appends el as encoding/json does (omitempty included).
func appendElement(b []byte, el *contract.Element) ([]byte, error) {
	b = AppendJSONString(append(b, `{"op":`...), el.Op)
	b = AppendJSONString(append(b, `,"member":`...), el.Member)
	var err error
	if len(el.Value) > 0 {
		if b, err = appendRaw(append(b, `,"value":`...), el.Value); err != nil {
			return nil, err
		}
	}
	b = appendOptString(b, `,"state":`, el.State)
	if el.Deliveries != 0 {
		b = strconv.AppendInt(append(b, `,"deliveries":`...), el.Deliveries, 10)
	}
	if b, err = appendOptTime(b, `,"visibleAt":`, el.VisibleAt); err != nil {
		return nil, err
	}
	b = appendOptString(b, `,"dedupId":`, el.DedupID)
	if b, err = appendOptTime(b, `,"pushedAt":`, el.PushedAt); err != nil {
		return nil, err
	}
	if b, err = appendOptTime(b, `,"expiresAt":`, el.ExpiresAt); err != nil {
		return nil, err
	}
	b = appendOptString(b, `,"receiptNonce":`, el.ReceiptNonce)
	return append(b, '}'), nil
}

// appendOptTime appends the member name and *t unless t is nil (a
// *time.Time field with omitempty).
func appendOptTime(b []byte, name string, t *time.Time) ([]byte, error) {
	if t == nil {
		return b, nil
	}
	return appendTime(append(b, name...), *t)
}

// appendSemantics appends s as encoding/json does (omitempty included).
func appendSemantics(b []byte, s *contract.Semantics) []byte {
	b = AppendJSONString(append(b, `{"purpose":`...), s.Purpose)
	b = appendOptString(b, `,"producer":`, s.Producer)
	if len(s.ConsumerHints) > 0 {
		b = append(b, `,"consumerHints":[`...)
		for i, h := range s.ConsumerHints {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, h)
		}
		b = append(b, ']')
	}
	if s.TTLSeconds != 0 {
		b = strconv.AppendInt(append(b, `,"ttlSeconds":`...), s.TTLSeconds, 10)
	}
	return append(b, '}')
}

// appendOptString appends the member name and s unless s is empty (a
// string field with omitempty).
func appendOptString(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	return AppendJSONString(append(b, name...), s)
}

// appendRaw appends a json.RawMessage as encoding/json does: null when
// nil, else compacted, and an error when it is not one JSON value. A
// value already compact (every value the writer decided) is copied as
// it is after one validating pass.
func appendRaw(b []byte, raw json.RawMessage) ([]byte, error) {
	if raw == nil {
		return append(b, "null"...), nil
	}
	if compact, err := scanCompact(raw); err == nil && compact {
		return append(b, raw...), nil
	}
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// scanCompact reports whether raw is exactly one valid JSON value with no
// whitespace outside its strings; an error when it is not valid.
func scanCompact(raw []byte) (bool, error) {
	s := scanner{b: raw}
	if err := s.skipValue(); err != nil {
		return false, err
	}
	return s.i == len(raw) && !s.spaced, nil
}

// appendTime appends t as time.Time's MarshalJSON does, with its errors:
// a year outside 0–9999, or a zone offset of 24 hours or more.
func appendTime(b []byte, t time.Time) ([]byte, error) {
	b = append(b, '"')
	n0 := len(b)
	b = t.AppendFormat(b, time.RFC3339Nano)
	num2 := func(b []byte) byte { return 10*(b[0]-'0') + (b[1] - '0') }
	switch {
	case b[n0+len("9999")] != '-':
		return nil, errors.New("Time.MarshalJSON: year outside of range [0,9999]")
	case b[len(b)-1] != 'Z':
		if c := b[len(b)-len("Z07:00")]; ('0' <= c && c <= '9') || num2(b[len(b)-len("07:00"):]) >= 24 {
			return nil, errors.New("Time.MarshalJSON: timezone hour outside of range [0,23]")
		}
	}
	return append(b, '"'), nil
}

// AppendJSONString appends s as a JSON string the way encoding/json does with
// HTML escaping off: short escapes for " \ \b \f \n \r \t, \u00XX for
// other control characters, \ufffd for invalid UTF-8, and \u2028 and
// \u2029 escaped (they end lines in JavaScript).
func AppendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(append(b, s[start:i]...), `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(append(b, s[start:i]...), '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(append(b, s[start:]...), '"')
}
