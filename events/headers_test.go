package events

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The headers and ids as they were built before they shared one buffer
// (headerValues, appendEventID): FuzzCloudEventHeaders holds the two
// equal.

func eventIDReference(key string, version int64) string {
	return uuid.NewSHA1(idNamespace, []byte(key+"\x00"+strconv.FormatInt(version, 10))).String()
}

func cloudEventHeadersReference(e *Event, source string) []Header {
	return []Header{
		{"ce_specversion", []byte("1.0")},
		{"ce_id", []byte(eventIDReference(e.Key, e.Version))},
		{"ce_type", []byte("io.eskv.kv." + string(e.Kind))},
		{"ce_source", []byte(source)},
		{"ce_subject", []byte(e.Key)},
		{"ce_time", []byte(e.TS.UTC().Format(time.RFC3339Nano))},
		{"ce_dataschema", []byte("https://eskv.io/schemas/events/change.v1.json")},
		{"content-type", []byte("application/json")},
	}
}

func conflictCloudEventHeadersReference(c *Conflict, source string) []Header {
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

func FuzzCloudEventHeaders(f *testing.F) {
	f.Add("tenant/acme/project/web/k", int64(7), "put", "writer", int64(1763942400123456789))
	f.Add(strings.Repeat("k", MaxKeyLen+1), int64(-1), "", "", int64(0))
	f.Add("", int64(1<<62), "delete", "w", int64(-62135596800000000000/1e9))
	f.Fuzz(func(t *testing.T, key string, version int64, kind, source string, ts int64) {
		if got, want := EventID(key, version), eventIDReference(key, version); got != want {
			t.Fatalf("EventID(%q, %d) = %s, want %s", key, version, got, want)
		}
		at := time.Unix(0, ts).Add(time.Duration(ts%1000) * 24 * 365 * time.Hour)
		e := &Event{Key: key, Version: version, Kind: Kind(kind), TS: at}
		if got, want := CloudEventHeaders(e, source), cloudEventHeadersReference(e, source); !reflect.DeepEqual(got, want) {
			t.Fatalf("CloudEventHeaders = %q, want %q", got, want)
		}
		c := &Conflict{ID: kind, Key: key, TS: at}
		if got, want := ConflictCloudEventHeaders(c, source), conflictCloudEventHeadersReference(c, source); !reflect.DeepEqual(got, want) {
			t.Fatalf("ConflictCloudEventHeaders = %q, want %q", got, want)
		}
	})
}

// TestHeaderValuesApart: appending to one header's value leaves the next
// as it was.
func TestHeaderValuesApart(t *testing.T) {
	hs := CloudEventHeaders(&Event{Key: "tenant/a/project/b/k", Version: 1, Kind: KindPut}, "writer")
	_ = append(hs[0].Value, "XXXX"...)
	if string(hs[1].Value) != EventID("tenant/a/project/b/k", 1) {
		t.Fatalf("ce_id = %q after an append to ce_specversion", hs[1].Value)
	}
}

func BenchmarkCloudEventHeaders(b *testing.B) {
	e := &Event{Key: "tenant/acme/project/web/k", Version: 7, Kind: KindPut, TS: time.Now()}
	b.Run("now", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			CloudEventHeaders(e, "writer")
		}
	})
	b.Run("before", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cloudEventHeadersReference(e, "writer")
		}
	})
}
