package changelog

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
)

// The CloudEvents 1.0 binary-mode headers of the two topics' records and
// the event id they carry: how a record of kv.changes or kv.conflicts
// describes itself to a CloudEvents consumer, beside its JSON value.

// Header is one Kafka record header.
type Header struct {
	Key   string
	Value []byte
}

// idNamespace is the UUIDv5 namespace of event ids.
var idNamespace = uuid.MustParse("6f1c4d52-4b0e-4c1a-9d7e-0c3e8a5b2f11")

// EventID returns the CloudEvents id of the event (key, version): a UUIDv5,
// the same for every delivery, so consumers can deduplicate on it.
func EventID(key string, version int64) string {
	var b [36]byte
	return string(appendEventID(b[:0], key, version))
}

// appendEventID appends EventID(key, version) to dst. It computes what
// uuid.NewSHA1(idNamespace, key+"\x00"+version).String() does (the
// reference in FuzzEventID) with its input on the stack: every event
// written computes one, and uuid's hash object, digest and string cost
// four allocations.
func appendEventID(dst []byte, key string, version int64) []byte {
	var in [len(idNamespace) + contract.MaxKeyLen + 1 + 20]byte
	if len(key) > contract.MaxKeyLen {
		return append(dst, uuid.NewSHA1(idNamespace, []byte(key+"\x00"+strconv.FormatInt(version, 10))).String()...)
	}
	data := append(append(append(in[:0], idNamespace[:]...), key...), 0)
	data = strconv.AppendInt(data, version, 10)
	sum := sha1.Sum(data)
	var u uuid.UUID
	copy(u[:], sum[:])
	u[6] = u[6]&0x0f | 5<<4 // version 5
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var text [36]byte
	hex.Encode(text[0:8], u[0:4])
	hex.Encode(text[9:13], u[4:6])
	hex.Encode(text[14:18], u[6:8])
	hex.Encode(text[19:23], u[8:10])
	hex.Encode(text[24:], u[10:])
	text[8], text[13], text[18], text[23] = '-', '-', '-', '-'
	return append(dst, text[:]...)
}

// CloudEventHeaders returns the CloudEvents 1.0 Kafka binary-mode headers
// of an event; source names the producing service.
func CloudEventHeaders(e *contract.Event, source string) []Header {
	return []Header{
		{"ce_specversion", []byte("1.0")},
		{"ce_id", []byte(EventID(e.Key, e.Version))},
		{"ce_type", []byte("io.eskv.kv." + string(e.Kind))},
		{"ce_source", []byte(source)},
		{"ce_subject", []byte(e.Key)},
		{"ce_time", []byte(e.TS.UTC().Format(time.RFC3339Nano))},
		{"ce_dataschema", []byte("https://eskv.io/schemas/events/change.v1.json")},
		{"content-type", []byte("application/json")},
	}
}

// ConflictCloudEventHeaders returns the CloudEvents 1.0 Kafka binary-mode
// headers of a kv.conflicts record; source names the producing service.
// They carry every required attribute (specversion, id, source, type) and
// time, like a change's, so one CloudEvents consumer reads both topics.
func ConflictCloudEventHeaders(c *decide.Conflict, source string) []Header {
	return []Header{
		{"ce_specversion", []byte("1.0")},
		{"ce_id", []byte(c.ID)},
		{"ce_type", []byte("io.eskv.kv.conflict")},
		{"ce_source", []byte(source)},
		{"ce_subject", []byte(c.Key)},
		{"ce_time", []byte(c.TS.UTC().Format(time.RFC3339Nano))},
		{"ce_dataschema", []byte("https://eskv.io/schemas/events/conflict.v1.json")},
		{"content-type", []byte("application/json")},
	}
}
