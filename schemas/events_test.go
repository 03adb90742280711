package schemas_test

import (
	"encoding/json"
	"io/fs"
	"path"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/eskv/eskv/schemas"
)

// validChange is a put with every optional field set.
const validChange = `{
	"schemaVersion": 1,
	"key": "tenant/acme/project/billing/jobs/invoices/checkpoint",
	"scope": "tenant/acme/project/billing",
	"version": 7,
	"prevVersion": 6,
	"kind": "put",
	"op": "cas",
	"before": {"offset": 1200},
	"after": {"offset": 1350},
	"createdAt": "2026-03-01T09:00:00Z",
	"expiresAt": "2026-03-02T10:15:30.5Z",
	"semantics": {"purpose": "checkpoint", "producer": "invoice-exporter", "consumerHints": ["reporting"], "ttlSeconds": 86400},
	"specRef": "https://specs.example/checkpoints",
	"requestId": "req-1",
	"requestDigest": "sha256:3f1b0c",
	"principal": "svc:invoice-exporter",
	"ts": "2026-03-01T10:15:30.5Z",
	"writerEpoch": 3
}`

const validConflict = `{
	"schemaVersion": 1,
	"id": "c-5b2f0e8e",
	"key": "tenant/acme/project/billing/jobs/invoices/checkpoint",
	"scope": "tenant/acme/project/billing",
	"op": "cas",
	"expectedVersion": 6,
	"currentVersion": 7,
	"attempted": {"offset": 1300},
	"current": {"offset": 1350},
	"semantics": {"purpose": "checkpoint"},
	"specRef": "https://specs.example/checkpoints",
	"requestId": "req-2",
	"principal": "svc:invoice-exporter",
	"ts": "2026-03-01T10:15:31Z",
	"reason": "version_mismatch"
}`

// docCase is a mutation of a valid document and whether the result must
// validate.
type docCase struct {
	name   string
	mutate func(doc map[string]any)
	ok     bool
}

func setField(field string, v any) func(map[string]any) {
	return func(doc map[string]any) { doc[field] = v }
}

func dropFields(fields ...string) func(map[string]any) {
	return func(doc map[string]any) {
		for _, f := range fields {
			delete(doc, f)
		}
	}
}

func setSemanticsField(field string, v any) func(map[string]any) {
	return func(doc map[string]any) { doc["semantics"].(map[string]any)[field] = v }
}

func applyAll(fs ...func(map[string]any)) func(map[string]any) {
	return func(doc map[string]any) {
		for _, f := range fs {
			f(doc)
		}
	}
}

// missingCases are the cases of a document without one of its required
// fields each.
func missingCases(required ...string) []docCase {
	cases := make([]docCase, len(required))
	for i, f := range required {
		cases[i] = docCase{"ErrMissing_" + f, dropFields(f), false}
	}
	return cases
}

// runDocCases applies each docCase to a fresh copy of base and checks the
// outcome of validate.
func runDocCases(t *testing.T, base string, validate func([]byte) error, cases []docCase) {
	t.Helper()
	for _, s := range cases {
		t.Run(s.name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal([]byte(base), &doc); err != nil {
				t.Fatal(err)
			}
			s.mutate(doc)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			err = validate(b)
			switch {
			case s.ok && err != nil:
				t.Errorf("valid document rejected: %v\n%s", err, b)
			case !s.ok && err == nil:
				t.Errorf("invalid document accepted:\n%s", b)
			}
		})
	}
}

func TestValidateChange(t *testing.T) {
	cases := []docCase{
		{"OK", func(map[string]any) {}, true},
		{"OKCreate", applyAll(setField("version", 1), setField("prevVersion", 0), setField("before", nil), setField("op", "create")), true},
		{"OKRecreateAfterDelete", applyAll(setField("version", 3), setField("prevVersion", 2), setField("before", nil)), true},
		{"OKPutNull", setField("after", nil), true},
		{"OKScalarValue", setField("after", 42), true},
		{"OKDelete", applyAll(setField("kind", "delete"), setField("op", "delete"), setField("after", nil), dropFields("expiresAt")), true},
		{"OKExpire", applyAll(setField("kind", "expire"), setField("op", "expire"), setField("after", nil)), true},
		{"OKFutureOp", setField("op", "lock_acquire"), true},
		{"OKOptionalFieldsAbsent", dropFields("expiresAt", "specRef", "requestId", "requestDigest"), true},
		{"OKMinimalSemantics", setField("semantics", map[string]any{"purpose": "other"}), true},
		{"OKUnknownField", setField("region", "eu-1"), true},
		{"OKUnknownSemanticsField", setSemanticsField("owner", "team-a"), true},
		{"OKTimeWithOffset", setField("ts", "2026-03-01T12:15:30.123456789+02:00"), true},
		{"OKKeyOf128", setField("key", "tenant/acme/project/billing/"+strings.Repeat("x", 128-len("tenant/acme/project/billing/"))), true},
		{"OKKeyDottedComponents", setField("key", "tenant/a.b/project/.c/..d/.../e."), true},
		{"OKZeroTime", setField("createdAt", "0001-01-01T00:00:00Z"), true},
		{"OKSetElement", applyAll(setField("op", "sadd"), setSemanticsField("purpose", "set"), setField("after", map[string]any{"type": "set", "size": 1, "since": 7}),
			setField("element", map[string]any{"op": "add", "member": "any text: /é?#"})), true},
		{"OKSetElementRemove", applyAll(setField("op", "srem"), setField("element", map[string]any{"op": "remove", "member": "m"})), true},
		{"OKListPush", applyAll(setField("op", "lpush"), setSemanticsField("purpose", "list"), setField("after", map[string]any{"type": "list", "size": 1, "since": 7, "head": -1}),
			setField("element", map[string]any{"op": "add", "member": "09223372036854775807", "value": map[string]any{"a": 1}})), true},
		{"OKQueuePush", applyAll(setField("op", "qpush"), setSemanticsField("purpose", "queue"), setField("after", map[string]any{"type": "queue", "size": 1, "since": 7}),
			setField("element", map[string]any{"op": "add", "member": "0000000000000007.8000000000000000.0000000000000007", "value": map[string]any{"job": 1},
				"state": "ready", "dedupId": "d-1", "pushedAt": "2026-03-01T10:15:30Z"})), true},
		{"OKQueuePopInFlight", applyAll(setField("op", "qpop"), setSemanticsField("purpose", "queue"), setField("after", map[string]any{"type": "queue", "size": 1, "since": 7, "inFlight": 1}),
			setField("element", map[string]any{"op": "add", "member": "0000000000000007.8000000000000000.0000000000000007", "value": "x",
				"state": "inflight", "deliveries": 1, "visibleAt": "2026-03-01T10:16:00Z", "pushedAt": "2026-03-01T10:15:30Z"})), true},
		{"OKQueueAckRemoves", applyAll(setField("op", "qack"), setField("element", map[string]any{"op": "remove", "member": "0000000000000007.8000000000000000.0000000000000007",
			"value": "x", "deliveries": 1, "pushedAt": "2026-03-01T10:15:30Z"})), true},
		{"OKQueuePushWithItemTTL", applyAll(setField("op", "qpush"), setSemanticsField("purpose", "queue"), setField("after", map[string]any{"type": "queue", "size": 1, "since": 7}),
			setField("element", map[string]any{"op": "add", "member": "0000000000000007.8000000000000000.0000000000000007", "value": 1,
				"state": "ready", "pushedAt": "2026-03-01T10:15:30Z", "expiresAt": "2026-03-01T10:16:30Z"})), true},
		{"OKQueueExpireRemoves", applyAll(setField("op", "qexpire"), setSemanticsField("purpose", "queue"), setField("after", map[string]any{"type": "queue", "size": 0, "since": 7}),
			setField("element", map[string]any{"op": "remove", "member": "0000000000000007.8000000000000000.0000000000000007", "value": 1,
				"deliveries": 1, "pushedAt": "2026-03-01T10:15:30Z", "expiresAt": "2026-03-01T10:16:30Z"})), true},
		{"OKListTrimNoElement", applyAll(setField("op", "ltrim"), setSemanticsField("purpose", "list"), setField("after", map[string]any{"type": "list", "size": 0, "since": 7, "head": 3})), true},

		{"ErrNotObject", func(doc map[string]any) { clear(doc) }, false}, // {} misses every required field
		{"ErrSchemaVersion2", setField("schemaVersion", 2), false},
		{"ErrKindUnknown", setField("kind", "update"), false},
		{"ErrKindUppercase", setField("kind", "PUT"), false},
		{"ErrVersionZero", applyAll(setField("version", 0), setField("prevVersion", 0), setField("before", nil)), false},
		{"ErrVersionNegative", setField("version", -1), false},
		{"ErrVersionFraction", setField("version", 7.5), false},
		{"ErrVersionString", setField("version", "7"), false},
		{"ErrPrevVersionNegative", setField("prevVersion", -1), false},
		{"ErrWriterEpochString", setField("writerEpoch", "3"), false},
		{"ErrKeyUppercase", setField("key", "tenant/Acme/project/billing/x"), false},
		{"ErrKeySpace", setField("key", "tenant/acme/project/billing/a b"), false},
		{"ErrKeyTab", setField("key", "tenant/acme/project/billing/a\tb"), false},
		{"ErrKeyNonASCII", setField("key", "tenant/acme/project/billing/café"), false},
		{"ErrKeyTooLong", setField("key", "tenant/acme/project/billing/"+strings.Repeat("x", 129-len("tenant/acme/project/billing/"))), false},
		{"ErrKeyNoPath", setField("key", "tenant/acme/project/billing"), false},
		{"ErrKeyTrailingSlash", setField("key", "tenant/acme/project/billing/x/"), false},
		{"ErrKeyLeadingSlash", setField("key", "/tenant/acme/project/billing/x"), false},
		{"ErrKeyDoubleSlash", setField("key", "tenant/acme/project/billing//x"), false},
		{"ErrKeyDotDot", setField("key", "tenant/acme/project/billing/../x"), false},
		{"ErrKeyDot", setField("key", "tenant/acme/project/billing/x/."), false},
		{"ErrKeyDotTenant", setField("key", "tenant/./project/billing/x"), false},
		{"ErrKeyWrongLiteral", setField("key", "tenants/acme/project/billing/x"), false},
		{"ErrKeyEmpty", setField("key", ""), false},
		{"ErrKeyNumber", setField("key", 7), false},
		{"ErrScopeWithPath", setField("scope", "tenant/acme/project/billing/jobs"), false},
		{"ErrScopeUppercase", setField("scope", "tenant/ACME/project/billing"), false},
		{"ErrOpEmpty", setField("op", ""), false},
		{"ErrOpUppercase", setField("op", "CAS"), false},
		{"ErrPutWithoutAfter", dropFields("after"), false},
		{"ErrDeleteWithAfter", applyAll(setField("kind", "delete"), setField("op", "delete")), false},
		{"ErrExpireWithAfter", applyAll(setField("kind", "expire"), setField("op", "expire"), setField("after", false)), false},
		{"ErrDeleteWithoutAfter", applyAll(setField("kind", "delete"), setField("op", "delete"), dropFields("after")), false},
		{"ErrFirstVersionWithBefore", applyAll(setField("version", 1), setField("prevVersion", 0)), false},
		{"ErrPurposeNotInEnum", setSemanticsField("purpose", "cache"), false},
		{"ErrPurposeEmpty", setSemanticsField("purpose", ""), false},
		{"ErrPurposeMissing", setField("semantics", map[string]any{"producer": "x"}), false},
		{"ErrSemanticsNotObject", setField("semantics", "checkpoint"), false},
		{"ErrTTLZero", setSemanticsField("ttlSeconds", 0), false},
		{"ErrConsumerHintsNotStrings", setSemanticsField("consumerHints", []any{1, 2}), false},
		{"ErrProducerNotString", setSemanticsField("producer", 5), false},
		{"ErrTimestampNotDateTime", setField("ts", "yesterday"), false},
		{"ErrTimestampWithoutZone", setField("createdAt", "2026-03-01T10:15:30"), false},
		{"ErrExpiresAtNull", setField("expiresAt", nil), false},
		{"ErrRequestIDNumber", setField("requestId", 12), false},
		{"ErrElementOpUnknown", setField("element", map[string]any{"op": "toggle", "member": "m"}), false},
		{"ErrElementMemberEmpty", setField("element", map[string]any{"op": "add", "member": ""}), false},
		{"ErrElementWithoutMember", setField("element", map[string]any{"op": "add"}), false},
		{"ErrElementNotObject", setField("element", "add m"), false},
		{"ErrQueueStateUnknown", setField("element", map[string]any{"op": "add", "member": "m", "state": "hidden"}), false},
		{"ErrQueueDeliveriesNegative", setField("element", map[string]any{"op": "add", "member": "m", "state": "ready", "deliveries": -1}), false},
		{"ErrQueueExpiresAtNotTime", setField("element", map[string]any{"op": "add", "member": "m", "state": "ready", "expiresAt": 60}), false},
		{"ErrQueueVisibleAtNotTime", setField("element", map[string]any{"op": "add", "member": "m", "state": "inflight", "visibleAt": "soon"}), false},
	}
	cases = append(cases, missingCases("schemaVersion", "key", "scope", "version", "prevVersion", "kind", "op", "before", "after", "createdAt", "ts", "semantics", "principal", "writerEpoch")...)
	runDocCases(t, validChange, schemas.ValidateChange, cases)
}

func TestValidateChangeNotJSON(t *testing.T) {
	for name, b := range map[string]string{
		"ErrEmpty":          "",
		"ErrTruncated":      `{"schemaVersion": 1`,
		"ErrTrailingData":   validChange + ` {}`,
		"ErrArray":          `[]`,
		"ErrNull":           `null`,
		"ErrTwoDocuments":   validChange + validChange,
		"ErrSingleQuotes":   `{'key': 'x'}`,
		"ErrNumberTopLevel": `1`,
	} {
		t.Run(name, func(t *testing.T) {
			if err := schemas.ValidateChange([]byte(b)); err == nil {
				t.Errorf("accepted %q", b)
			}
		})
	}
}

func TestValidateConflict(t *testing.T) {
	cases := []docCase{
		{"OK", func(map[string]any) {}, true},
		{"OKExpectAbsent", applyAll(setField("expectedVersion", 0), setField("op", "create")), true},
		{"OKKeyAbsent", applyAll(setField("currentVersion", 0), setField("current", nil)), true},
		{"OKDelete", applyAll(setField("op", "delete"), setField("attempted", nil)), true},
		{"OKRequestIDReused", setField("reason", "request_id_reused"), true},
		{"OKForbidden", applyAll(setField("reason", "forbidden"), setField("op", "put"), setField("expectedVersion", -1),
			setField("currentVersion", 0), setField("attempted", nil), setField("current", nil), dropFields("specRef")), true},
		{"OKFutureReason", setField("reason", "lock_held"), true},
		{"OKOptionalFieldsAbsent", dropFields("specRef", "requestId"), true},
		{"OKUnknownField", setField("region", "eu-1"), true},

		{"ErrSchemaVersion2", setField("schemaVersion", 2), false},
		{"ErrIDEmpty", setField("id", ""), false},
		{"ErrKeyUppercase", setField("key", "tenant/acme/project/Billing/x"), false},
		{"ErrScopeWithPath", setField("scope", "tenant/acme/project/billing/x"), false},
		{"ExpectedVersionNone", setField("expectedVersion", -1), true},
		{"ErrExpectedVersionNegative", setField("expectedVersion", -2), false},
		{"ErrCurrentVersionFraction", setField("currentVersion", 1.5), false},
		{"ErrPurposeNotInEnum", setSemanticsField("purpose", "cache"), false},
		{"ErrReasonEmpty", setField("reason", ""), false},
		{"ErrReasonUppercase", setField("reason", "Version_Mismatch"), false},
		{"ErrTimestampNotDateTime", setField("ts", "2026-03-01"), false},
	}
	cases = append(cases, missingCases("schemaVersion", "id", "key", "scope", "op", "expectedVersion", "currentVersion", "attempted", "current", "semantics", "principal", "ts", "reason")...)
	runDocCases(t, validConflict, schemas.ValidateConflict, cases)
}

// loadSchemas returns every embedded event schema by file name.
func loadEventSchemas(tb testing.TB) map[string]map[string]any {
	tb.Helper()
	files, err := fs.Glob(schemas.Events, "events/*.json")
	if err != nil {
		tb.Fatal(err)
	}
	out := make(map[string]map[string]any)
	for _, name := range files {
		b, err := schemas.Events.ReadFile(name)
		if err != nil {
			tb.Fatal(err)
		}
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		out[path.Base(name)] = doc
	}
	return out
}

func TestSchemaFiles(t *testing.T) {
	docs := loadEventSchemas(t)
	want := map[string]string{
		"change.v1.json":   schemas.ChangeSchemaID,
		"conflict.v1.json": schemas.ConflictSchemaID,
	}
	if len(docs) != len(want) {
		t.Errorf("embedded schemas %v, want %v", mapKeys(docs), mapKeys(want))
	}
	for name, id := range want {
		doc := docs[name]
		if doc == nil {
			t.Errorf("%s is not embedded", name)
			continue
		}
		if doc["$id"] != id {
			t.Errorf("%s: $id = %v, want %s", name, doc["$id"], id)
		}
		if doc["$schema"] != "https://json-schema.org/draft/2020-12/schema" {
			t.Errorf("%s: $schema = %v, want draft 2020-12", name, doc["$schema"])
		}
		if doc["additionalProperties"] != true {
			t.Errorf("%s: additionalProperties must be true: consumers tolerate new fields", name)
		}
	}
}

// TestSchemasDocumentEveryField checks that every property and definition
// carries a description: the schemas are the consumers' documentation.
func TestSchemasDocumentEveryField(t *testing.T) {
	for name, doc := range loadEventSchemas(t) {
		t.Run(name, func(t *testing.T) {
			if d, _ := doc["description"].(string); d == "" {
				t.Error("no top-level description")
			}
			var walk func(at string, s map[string]any)
			walk = func(at string, s map[string]any) {
				for _, group := range []string{"properties", "$defs"} {
					m, _ := s[group].(map[string]any)
					for field, sub := range m {
						sub, _ := sub.(map[string]any)
						loc := at + "/" + group + "/" + field
						if d, _ := sub["description"].(string); d == "" {
							t.Errorf("%s has no description", loc)
						}
						walk(loc, sub)
					}
				}
			}
			walk("#", doc)
		})
	}
}

// TestSchemasShareDefinitions keeps the definitions that both schemas
// carry (each file is self-contained) identical.
func TestSchemasShareDefinitions(t *testing.T) {
	docs := loadEventSchemas(t)
	change, _ := docs["change.v1.json"]["$defs"].(map[string]any)
	conflict, _ := docs["conflict.v1.json"]["$defs"].(map[string]any)
	for _, def := range []string{"key", "scope", "timestamp", "semantics"} {
		if change[def] == nil {
			t.Errorf("change.v1.json has no $defs/%s", def)
			continue
		}
		if !reflect.DeepEqual(change[def], conflict[def]) {
			t.Errorf("$defs/%s differs between change.v1.json and conflict.v1.json", def)
		}
	}
}

// TestSchemaExamples checks that the examples in each schema validate.
func TestSchemaExamples(t *testing.T) {
	validators := map[string]func([]byte) error{
		"change.v1.json":   schemas.ValidateChange,
		"conflict.v1.json": schemas.ValidateConflict,
	}
	for name, doc := range loadEventSchemas(t) {
		examples, _ := doc["examples"].([]any)
		if len(examples) == 0 {
			t.Errorf("%s has no examples", name)
		}
		for i, ex := range examples {
			b, err := json.Marshal(ex)
			if err != nil {
				t.Fatal(err)
			}
			if err := validators[name](b); err != nil {
				t.Errorf("%s: example %d: %v", name, i, err)
			}
		}
	}
}

func TestValidateConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 20 {
				if err := schemas.ValidateChange([]byte(validChange)); err != nil {
					t.Error(err)
					return
				}
				if err := schemas.ValidateConflict([]byte(validConflict)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkValidateChange(b *testing.B) {
	doc := []byte(validChange)
	if err := schemas.ValidateChange(doc); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := schemas.ValidateChange(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func mapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
