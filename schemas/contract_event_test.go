package schemas_test

import (
	"bytes"
	"crypto/sha1"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/schemas"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	t1 = time.Date(2026, 3, 1, 10, 15, 30, 500_000_000, time.UTC)
	t2 = time.Date(2026, 3, 2, 10, 15, 30, 500_000_000, time.UTC)
)

const testKey = "tenant/acme/project/billing/jobs/invoices/checkpoint"

// goldenPut is the event encoded in testdata/event_put.golden.json: a CAS
// put with every optional field set.
func goldenPut() contract.Event {
	return contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           testKey,
		Scope:         "tenant/acme/project/billing",
		Version:       7,
		PrevVersion:   6,
		Kind:          contract.KindPut,
		Op:            contract.OpCAS,
		Before:        json.RawMessage(`{"offset":1200}`),
		After:         json.RawMessage(`{"offset":1350,"note":"<ok> & done"}`),
		CreatedAt:     t0,
		ExpiresAt:     &t2,
		Semantics: contract.Semantics{
			Purpose:       "checkpoint",
			Producer:      "invoice-exporter",
			ConsumerHints: []string{"reporting", "billing-ui"},
			TTLSeconds:    86400,
		},
		SpecRef:       "https://specs.example/checkpoints",
		RequestID:     "req-01HQ3Z6X",
		RequestDigest: "sha256:3f1b0c",
		Principal:     "svc:invoice-exporter",
		TS:            t1,
		WriterEpoch:   3,
	}
}

// samples are events of every kind, as a writer produces them. Absent
// values are JSON null, as they decode.
func samples() map[string]contract.Event {
	null := json.RawMessage("null")
	create := contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           "tenant/acme/project/web/flags/dark-mode",
		Scope:         "tenant/acme/project/web",
		Version:       1,
		PrevVersion:   0,
		Kind:          contract.KindPut,
		Op:            contract.OpCreate,
		Before:        null,
		After:         json.RawMessage(`true`),
		CreatedAt:     t1,
		Semantics:     contract.Semantics{Purpose: "feature_flag"},
		RequestID:     "req-1",
		Principal:     "alice",
		TS:            t1,
		WriterEpoch:   1,
	}
	set := create
	set.Version, set.PrevVersion, set.Op = 2, 1, contract.OpSet
	set.Before, set.After = json.RawMessage(`true`), json.RawMessage(`false`)

	putNull := set
	putNull.Version, putNull.PrevVersion = 3, 2
	putNull.Before, putNull.After = json.RawMessage(`false`), null

	increment := contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           "tenant/acme/project/web/counters/visits",
		Scope:         "tenant/acme/project/web",
		Version:       42,
		PrevVersion:   41,
		Kind:          contract.KindPut,
		Op:            "increment",
		Before:        json.RawMessage(`41`),
		After:         json.RawMessage(`42`),
		CreatedAt:     t0,
		Semantics:     contract.Semantics{Purpose: "counter", Producer: "web"},
		Principal:     "svc:web",
		TS:            t1,
		WriterEpoch:   2,
	}

	lease := t1.Add(30 * time.Second)
	lock := contract.Event{
		SchemaVersion: contract.SchemaVersion,
		Key:           "tenant/acme/project/billing/locks/nightly",
		Scope:         "tenant/acme/project/billing",
		Version:       4,
		PrevVersion:   3,
		Kind:          contract.KindPut,
		Op:            "lock_acquire",
		Before:        null,
		After:         json.RawMessage(`{"holder":"worker-2"}`),
		CreatedAt:     t1,
		ExpiresAt:     &lease,
		Semantics:     contract.Semantics{Purpose: "lock", TTLSeconds: 30},
		Principal:     "svc:worker-2",
		TS:            t1,
		WriterEpoch:   3,
	}

	del := set
	del.Version, del.PrevVersion = 3, 2
	del.Kind, del.Op = contract.KindDelete, contract.OpDelete
	del.Before, del.After = json.RawMessage(`false`), null
	del.TS = t2

	expire := lock
	expire.Version, expire.PrevVersion = 5, 4
	expire.Kind, expire.Op = contract.KindExpire, contract.OpExpire
	expire.Before, expire.After = lock.After, null
	expire.Principal = "system:sweeper"
	expire.TS = lease.Add(2 * time.Millisecond)

	recreate := create
	recreate.Version, recreate.PrevVersion = 4, 3
	recreate.CreatedAt, recreate.TS = t2, t2

	// A touch: the same value, a new expiry.
	touch := increment
	touch.Version, touch.PrevVersion, touch.Op = 43, 42, contract.OpTouch
	touch.Before, touch.After = increment.After, increment.After
	touch.ExpiresAt, touch.Semantics.TTLSeconds = &lease, 30

	// An event of a transaction of three writes.
	txn := increment
	txn.TxnID, txn.TxnSize, txn.RequestID, txn.RequestDigest = "3f1e9c52-7a1d-5b7e-9c2a-0d4e6f8a1b3c", 3, "transfer-0042", "9f2c"

	// A session's entry (purpose session), a key attached to it, and the
	// delete of that key at the session's end (docs/sessions.md).
	sessionKey := "tenant/acme/project/web/sessions/web-1"
	session := set
	session.Key, session.Op, session.Version, session.PrevVersion = sessionKey, contract.OpSessionAttach, 2, 1
	session.Before, session.After = json.RawMessage(`{"ttlSeconds":10,"attached":[]}`), json.RawMessage(`{"ttlSeconds":10,"attached":[{"key":"tenant/acme/project/web/services/web/1","version":1}]}`)
	session.ExpiresAt, session.Semantics = &lease, contract.Semantics{Purpose: contract.PurposeSession, TTLSeconds: 10}
	attached := create
	attached.Key, attached.Version, attached.PrevVersion = "tenant/acme/project/web/services/web/1", 1, 0
	attached.Session = &contract.SessionLink{Key: sessionKey}
	attached.TxnID, attached.TxnSize, session.TxnID, session.TxnSize = "5b0a3c1e-2d4f-5a6b-8c7d-9e0f1a2b3c4d", 2, "5b0a3c1e-2d4f-5a6b-8c7d-9e0f1a2b3c4d", 2
	ended := del
	ended.Key, ended.Version, ended.PrevVersion = attached.Key, 2, 1
	ended.Session = &contract.SessionLink{Key: sessionKey, Reason: contract.SessionExpired}
	ended.TxnID, ended.TxnSize = "7c1d2e3f-4a5b-5c6d-8e7f-0a1b2c3d4e5f", 2

	return map[string]contract.Event{
		"SessionAttach":  session,
		"SessionPut":     attached,
		"SessionEnded":   ended,
		"PutTxn":         txn,
		"GoldenPut":      goldenPut(),
		"PutCreate":      create,
		"PutSet":         set,
		"PutNull":        putNull,
		"PutIncrement":   increment,
		"PutLockAcquire": lock,
		"PutTouch":       touch,
		"Delete":         del,
		"Expire":         expire,
		"Recreate":       recreate,
	}
}

// checkSamples checks every sample: its JSON passes validate (the
// contract consumers rely on) and reads back unchanged.
func checkSamples[T any](t *testing.T, samples map[string]T, marshal func(*T) ([]byte, error), validate func([]byte) error, unmarshal func([]byte) (T, error)) {
	t.Helper()
	for name, v := range samples {
		t.Run("OK"+name, func(t *testing.T) {
			b, err := marshal(&v)
			if err != nil {
				t.Fatal(err)
			}
			if err := validate(b); err != nil {
				t.Errorf("%v\n%s", err, b)
			}
			got, err := unmarshal(b)
			if err != nil {
				t.Fatalf("unmarshal(%s): %v", b, err)
			}
			if !reflect.DeepEqual(got, v) {
				t.Errorf("round trip changed the %T:\n got %+v\nwant %+v", v, got, v)
			}
		})
	}
}

// TestEventsMatchSchema validates every sample against the contract
// consumers rely on and reads it back.
func TestEventsMatchSchema(t *testing.T) {
	checkSamples(t, samples(), codec.MarshalEvent, schemas.ValidateChange, codec.UnmarshalEvent)

	t.Run("ErrNoPurpose", func(t *testing.T) {
		// Writers must always set a purpose (for delete and expire, the
		// removed entry's).
		e := samples()["Delete"]
		e.Semantics = contract.Semantics{}
		if b := mustMarshal(t, &e); schemas.ValidateChange(b) == nil {
			t.Errorf("accepted an event without purpose: %s", b)
		}
	})
}

func TestMarshal(t *testing.T) {
	t.Run("OKNilValuesAreNull", func(t *testing.T) {
		e := samples()["Delete"]
		e.Before, e.After = nil, nil
		b := mustMarshal(t, &e)
		if !bytes.Contains(b, []byte(`"before":null`)) || !bytes.Contains(b, []byte(`"after":null`)) {
			t.Errorf("nil values not encoded as null: %s", b)
		}
		if err := schemas.ValidateChange(b); err != nil {
			t.Error(err)
		}
	})

	t.Run("OKOptionalFieldsOmitted", func(t *testing.T) {
		e := samples()["PutCreate"]
		e.RequestID = ""
		var m map[string]any
		if err := json.Unmarshal(mustMarshal(t, &e), &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"expiresAt", "specRef", "requestId", "requestDigest"} {
			if _, ok := m[f]; ok {
				t.Errorf("empty %s is encoded", f)
			}
		}
		sem := m["semantics"].(map[string]any)
		for _, f := range []string{"producer", "consumerHints", "ttlSeconds"} {
			if _, ok := sem[f]; ok {
				t.Errorf("empty semantics.%s is encoded", f)
			}
		}
	})

	t.Run("OKValueCompacted", func(t *testing.T) {
		e := samples()["PutSet"]
		e.After = json.RawMessage("{ \"a\" :\n [1, 2] }")
		if b := mustMarshal(t, &e); !bytes.Contains(b, []byte(`"after":{"a":[1,2]}`)) {
			t.Errorf("after not compacted: %s", b)
		}
	})

	t.Run("OKValueBytesKept", func(t *testing.T) {
		// The value in the record is the value stored and answered, byte
		// for byte: no HTML escaping of <, >, & (or U+2028).
		e := samples()["PutSet"]
		e.After = json.RawMessage("{\"html\":\"<a href=\\\"x\\\">&amp;</a>\",\"ls\":\"\u2028\"}")
		if b := mustMarshal(t, &e); !bytes.Contains(b, []byte(`"after":`+string(e.After)+`,`)) {
			t.Errorf("after changed in encoding: %s", b)
		}
	})

	t.Run("ErrInvalidValue", func(t *testing.T) {
		e := samples()["PutSet"]
		e.After = json.RawMessage(`{"a":`)
		if b, err := codec.MarshalEvent(&e); err == nil {
			t.Errorf("encoded an invalid value: %s", b)
		}
	})
}

func mustMarshal(tb testing.TB, e *contract.Event) []byte {
	tb.Helper()
	b, err := codec.MarshalEvent(e)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestGolden pins the encoding of an event: consumers parse these bytes,
// so a change shows up here first. Run with -update to rewrite the file
// after a deliberate (additive) change.
func TestGolden(t *testing.T) {
	const golden = "testdata/event_put.golden.json"
	e := goldenPut()
	got := append(mustMarshal(t, &e), '\n')
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGolden -update to create it)", err)
	}
	t.Run("OKEncoding", func(t *testing.T) {
		if !bytes.Equal(got, want) {
			t.Errorf("encoding differs from %s (run with -update if the change is deliberate):\n got %s\nwant %s", golden, got, want)
		}
	})
	t.Run("OKDecodes", func(t *testing.T) {
		d, err := codec.UnmarshalEvent(want)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(d, e) {
			t.Errorf("golden file decodes to\n%+v\nwant\n%+v", d, e)
		}
	})
	t.Run("OKMatchesSchema", func(t *testing.T) {
		if err := schemas.ValidateChange(want); err != nil {
			t.Error(err)
		}
	})
}

func TestUnmarshal(t *testing.T) {
	e := goldenPut()
	valid := string(mustMarshal(t, &e))
	// replace returns valid with one field's encoding replaced.
	replace := func(old, new string) string {
		if !strings.Contains(valid, old) {
			t.Fatalf("%s is not in %s", old, valid)
		}
		return strings.Replace(valid, old, new, 1)
	}
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"OK", valid, true},
		{"OKUnknownFieldIgnored", replace(`{"schemaVersion":1,`, `{"schemaVersion":1,"region":"eu-1",`), true},
		{"OKDelete", replace(`"kind":"put"`, `"kind":"delete"`), true},
		{"OKExpire", replace(`"kind":"put"`, `"kind":"expire"`), true},
		{"OKFirstVersion", replace(`"version":7,"prevVersion":6`, `"version":1,"prevVersion":0`), true},

		{"ErrVersionZero", replace(`"version":7,"prevVersion":6`, `"version":0,"prevVersion":0`), false},
		{"ErrVersionNegative", replace(`"version":7,"prevVersion":6`, `"version":-1,"prevVersion":-2`), false},
		{"ErrVersionMissing", replace(`"version":7,`, ``), false},
		{"ErrPrevVersionEqual", replace(`"prevVersion":6`, `"prevVersion":7`), false},
		{"ErrPrevVersionGreater", replace(`"prevVersion":6`, `"prevVersion":8`), false},
		{"ErrKeyEmpty", replace(`"key":"`+testKey+`"`, `"key":""`), false},
		{"ErrKeyMissing", replace(`"key":"`+testKey+`",`, ``), false},
		{"ErrKindUnknown", replace(`"kind":"put"`, `"kind":"update"`), false},
		{"ErrKindUppercase", replace(`"kind":"put"`, `"kind":"PUT"`), false},
		{"ErrKindMissing", replace(`"kind":"put",`, ``), false},
		{"ErrVersionString", replace(`"version":7`, `"version":"7"`), false},
		{"ErrTimeInvalid", replace(`"ts":"2026-03-01T10:15:30.5Z"`, `"ts":"yesterday"`), false},
		{"ErrNotJSON", `{"key":`, false},
		{"ErrEmpty", ``, false},
		{"ErrArray", `[]`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := codec.UnmarshalEvent([]byte(tt.in))
			if tt.ok {
				if err != nil {
					t.Errorf("Unmarshal(%s): %v", tt.in, err)
				}
				return
			}
			if err == nil {
				t.Errorf("Unmarshal(%s) = %+v, want an error", tt.in, got)
			}
			if !reflect.DeepEqual(got, contract.Event{}) {
				t.Errorf("Unmarshal returned %+v with its error", got)
			}
		})
	}
}

func TestEventID(t *testing.T) {
	t.Run("OKPinned", func(t *testing.T) {
		// Consumers deduplicate on ce_id across releases: it never changes.
		// The value is also in change.v1.json's description.
		const want = "e43f61ce-695e-5d3d-beaf-5b4865811741"
		if got := changelog.EventID(testKey, 7); got != want {
			t.Errorf("EventID = %s, want %s", got, want)
		}
	})

	t.Run("OKUUIDv5OfKeyNULVersion", func(t *testing.T) {
		// The derivation documented for non-Go consumers (RFC 9562 §5.5).
		ns := uuid.MustParse("6f1c4d52-4b0e-4c1a-9d7e-0c3e8a5b2f11")
		for _, tt := range []struct {
			key     string
			version int64
		}{{testKey, 1}, {testKey, 1234567890123}, {"tenant/a/project/b/c", 9}} {
			h := sha1.New()
			h.Write(ns[:])
			fmt.Fprintf(h, "%s\x00%d", tt.key, tt.version)
			var u uuid.UUID
			copy(u[:], h.Sum(nil))
			u[6] = u[6]&0x0f | 0x50
			u[8] = u[8]&0x3f | 0x80
			got := changelog.EventID(tt.key, tt.version)
			if got != u.String() {
				t.Errorf("EventID(%s, %d) = %s, want %s", tt.key, tt.version, got, u)
			}
			p, err := uuid.Parse(got)
			if err != nil || p.Version() != 5 || p.Variant() != uuid.RFC4122 {
				t.Errorf("EventID(%s, %d) = %s is not an RFC 4122 UUIDv5 (%v)", tt.key, tt.version, got, err)
			}
		}
	})

	t.Run("OKDeterministic", func(t *testing.T) {
		if a, b := changelog.EventID(testKey, 3), changelog.EventID(testKey, 3); a != b {
			t.Errorf("EventID differs between calls: %s, %s", a, b)
		}
	})

	t.Run("OKDistinctPerKeyAndVersion", func(t *testing.T) {
		seen := make(map[string]string)
		add := func(key string, version int64) {
			id := changelog.EventID(key, version)
			at := fmt.Sprintf("%s@%d", key, version)
			if prev, ok := seen[id]; ok {
				t.Errorf("%s and %s share id %s", prev, at, id)
			}
			seen[id] = at
		}
		for _, k := range []string{testKey, "tenant/acme/project/billing/x", "tenant/acme/project/billing/x1", "tenant/acme/project/billing/x11"} {
			for v := int64(1); v <= 200; v++ {
				add(k, v)
			}
		}
		// Without the NUL separator, x1@1 and x@11 would both hash "x11".
		if changelog.EventID("tenant/acme/project/billing/x1", 1) == changelog.EventID("tenant/acme/project/billing/x", 11) {
			t.Error("key and version are not separated")
		}
	})
}

// TestConflictCloudEventHeaders: a kv.conflicts record carries the same
// required attributes as a change (source and time included), its type
// and its own data schema.
func TestConflictCloudEventHeaders(t *testing.T) {
	c := decide.Conflict{ID: "c-1", Key: testKey, TS: time.Date(2026, 3, 1, 12, 0, 0, 5, time.FixedZone("CET", 3600))}
	hs := changelog.ConflictCloudEventHeaders(&c, "eskv-writer/w1")
	want := []changelog.Header{
		{Key: "ce_specversion", Value: []byte("1.0")},
		{Key: "ce_id", Value: []byte("c-1")},
		{Key: "ce_type", Value: []byte("io.eskv.kv.conflict")},
		{Key: "ce_source", Value: []byte("eskv-writer/w1")},
		{Key: "ce_subject", Value: []byte(testKey)},
		{Key: "ce_time", Value: []byte("2026-03-01T11:00:00.000000005Z")},
		{Key: "ce_dataschema", Value: []byte(schemas.ConflictSchemaID)},
		{Key: "content-type", Value: []byte("application/json")},
	}
	if !reflect.DeepEqual(hs, want) {
		t.Errorf("headers:\n got %s\nwant %s", fmtHeaders(hs), fmtHeaders(want))
	}
}

func TestCloudEventHeaders(t *testing.T) {
	for name, e := range samples() {
		t.Run("OK"+name, func(t *testing.T) {
			hs := changelog.CloudEventHeaders(&e, "/eskv/writer")
			want := []changelog.Header{
				{Key: "ce_specversion", Value: []byte("1.0")},
				{Key: "ce_id", Value: []byte(changelog.EventID(e.Key, e.Version))},
				{Key: "ce_type", Value: []byte("io.eskv.kv." + string(e.Kind))},
				{Key: "ce_source", Value: []byte("/eskv/writer")},
				{Key: "ce_subject", Value: []byte(e.Key)},
				{Key: "ce_time", Value: []byte(e.TS.Format(time.RFC3339Nano))},
				{Key: "ce_dataschema", Value: []byte(schemas.ChangeSchemaID)},
				{Key: "content-type", Value: []byte("application/json")},
			}
			if !reflect.DeepEqual(hs, want) {
				t.Errorf("headers:\n got %s\nwant %s", fmtHeaders(hs), fmtHeaders(want))
			}
		})
	}

	t.Run("OKTypes", func(t *testing.T) {
		for kind, want := range map[contract.Kind]string{
			contract.KindPut:    "io.eskv.kv.put",
			contract.KindDelete: "io.eskv.kv.delete",
			contract.KindExpire: "io.eskv.kv.expire",
		} {
			e := contract.Event{Key: testKey, Version: 1, Kind: kind, TS: t1}
			if got := header(changelog.CloudEventHeaders(&e, "s"), "ce_type"); got != want {
				t.Errorf("%s: ce_type = %q, want %q", kind, got, want)
			}
		}
	})

	t.Run("OKTimeInUTC", func(t *testing.T) {
		e := goldenPut()
		e.TS = time.Date(2026, 3, 1, 12, 15, 30, 123456789, time.FixedZone("CET", 2*3600))
		if got, want := header(changelog.CloudEventHeaders(&e, "s"), "ce_time"), "2026-03-01T10:15:30.123456789Z"; got != want {
			t.Errorf("ce_time = %q, want %q", got, want)
		}
	})
}

func header(hs []changelog.Header, key string) string {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func fmtHeaders(hs []changelog.Header) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "\n  %s=%s", h.Key, h.Value)
	}
	return b.String()
}

func TestState(t *testing.T) {
	s := samples()
	before := t2.Add(-time.Second)

	t.Run("OKPut", func(t *testing.T) {
		e := goldenPut()
		st := keystate.FromEvent(&e)
		if !st.Live || st.Version != 7 || st.RequestDigest != e.RequestDigest {
			t.Errorf("State() = %+v", st)
		}
		want := contract.Entry{
			Key:        e.Key,
			Value:      e.After,
			Version:    7,
			CreatedAt:  t0,
			UpdatedAt:  t1,
			ExpiresAt:  &t2,
			LastWriter: e.Principal,
			RequestID:  e.RequestID,
			SpecRef:    e.SpecRef,
			Semantics:  e.Semantics,
		}
		if !reflect.DeepEqual(st.Entry, want) {
			t.Errorf("Entry = %+v, want %+v", st.Entry, want)
		}
		if got := st.Visible(before); got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("Visible before expiry = %+v, want %+v", got, want)
		}
	})

	t.Run("OKPutWithoutExpiryStaysVisible", func(t *testing.T) {
		e := s["PutSet"]
		st := keystate.FromEvent(&e)
		if st.Visible(t1.AddDate(100, 0, 0)) == nil {
			t.Error("an entry without expiresAt is not visible")
		}
	})

	t.Run("OKPutNullIsVisible", func(t *testing.T) {
		e := s["PutNull"]
		st := keystate.FromEvent(&e)
		if got := st.Visible(t1); got == nil || string(got.Value) != "null" {
			t.Errorf("Visible = %+v, want the entry with value null", got)
		}
	})

	t.Run("AbsentAtExpiry", func(t *testing.T) {
		e := goldenPut()
		st := keystate.FromEvent(&e)
		if got := st.Visible(t2); got != nil {
			t.Errorf("Visible at expiresAt = %+v, want nil", got)
		}
		if got := st.Visible(t2.Add(time.Nanosecond)); got != nil {
			t.Errorf("Visible after expiresAt = %+v, want nil", got)
		}
		if !st.Live {
			t.Error("an entry past its expiry is still live until its expire event")
		}
	})

	for _, name := range []string{"Delete", "Expire"} {
		t.Run("Absent"+name, func(t *testing.T) {
			e := s[name]
			st := keystate.FromEvent(&e)
			if st.Live {
				t.Errorf("%s leaves the key live", name)
			}
			if st.Version != e.Version {
				t.Errorf("Version = %d, want %d: versions never go back", st.Version, e.Version)
			}
			if st.Entry.Key != e.Key || st.Entry.Version != e.Version || !st.Entry.UpdatedAt.Equal(e.TS) || st.Entry.LastWriter != e.Principal {
				t.Errorf("Entry = %+v, want the key, version, ts and principal of the event", st.Entry)
			}
			if got := st.Visible(e.TS); got != nil {
				t.Errorf("Visible = %+v, want nil", got)
			}
		})
	}

	t.Run("OKVisibleReturnsACopy", func(t *testing.T) {
		e := s["PutSet"]
		st := keystate.FromEvent(&e)
		v := st.Visible(t1)
		v.Version = 99
		if st.Entry.Version == 99 {
			t.Error("changing the visible entry changed the state")
		}
	})

	t.Run("AbsentNeverWritten", func(t *testing.T) {
		var st keystate.State
		if st.Visible(t1) != nil || st.Version != 0 {
			t.Errorf("zero State is visible or versioned: %+v", st)
		}
	})
}

func TestEntryExpired(t *testing.T) {
	tests := []struct {
		name      string
		expiresAt *time.Time
		now       time.Time
		want      bool
	}{
		{"NoExpiry", nil, t2.AddDate(10, 0, 0), false},
		{"Before", &t2, t2.Add(-time.Nanosecond), false},
		{"ExpiredAtTheInstant", &t2, t2, true},
		{"ExpiredAfter", &t2, t2.Add(time.Nanosecond), true},
		{"ExpiredInOtherZone", &t2, t2.In(time.FixedZone("X", -5*3600)), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := contract.Entry{ExpiresAt: tt.expiresAt}
			if got := e.Expired(tt.now); got != tt.want {
				t.Errorf("Expired(%v) = %v, want %v", tt.now, got, tt.want)
			}
		})
	}
}

// keyCases are keys on both sides of the rules, for checking that ParseKey
// and the schema's key pattern agree.
var keyCases = []string{
	"tenant/acme/project/web/flags/dark-mode",
	"tenant/a-b_c.9/project/0.z_-/a.b/c-d/e_f",
	"tenant/.a/project/a./.../..b",
	"tenant/acme/project/web/" + strings.Repeat("x", 104),
	"tenant/acme/project/web/" + strings.Repeat("x", 105),
	"tenant/acme/project/web",
	"tenant/acme/project/web/",
	"/tenant/acme/project/web/x",
	"tenant//project/web/x",
	"tenant/acme/project/web//x",
	"tenant/acme/project/web/../x",
	"tenant/acme/project/web/./x",
	"tenant/acme/project/web/x/..",
	"tenant/Acme/project/web/x",
	"tenant/acme/project/web/a b",
	"tenant/acme/project/web/a\tb",
	"tenant/acme/project/web/café",
	"tenants/acme/project/web/x",
	"tenant/acme/projects/web/x",
	"project/web/tenant/acme/x",
	"",
}

// keyMatchesSchema reports whether an event with key k validates against
// the schema. The scope stays valid, so only the key pattern decides.
func keyMatchesSchema(tb testing.TB, k string) bool {
	tb.Helper()
	e := goldenPut()
	e.Key = k
	return schemas.ValidateChange(mustMarshal(tb, &e)) == nil
}

func TestKeyRulesMatchSchema(t *testing.T) {
	for _, k := range keyCases {
		_, err := contract.ParseKey(k)
		if got, want := keyMatchesSchema(t, k), err == nil; got != want {
			t.Errorf("key %q: schema accepts it: %v, ParseKey accepts it: %v (%v)", k, got, want, err)
		}
	}
}

func FuzzKeyRulesMatchSchema(f *testing.F) {
	for _, k := range keyCases {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		_, err := contract.ParseKey(k)
		if got, want := keyMatchesSchema(t, k), err == nil; got != want {
			t.Fatalf("key %q: schema accepts it: %v, ParseKey accepts it: %v (%v)", k, got, want, err)
		}
	})
}
