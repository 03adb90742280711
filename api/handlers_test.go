package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projection/keystate"
	"github.com/eskv/eskv/writer"
)

// fakeWriter answers from a map of states and records the requests it is
// asked to decide; every write is accepted.
type fakeWriter struct {
	states map[string]keystate.State
	reqs   []written
	denied []deniedWrite
	// waiting, when set, holds every DoWait until it is closed or the
	// request's context ends, then answers it without recording it (the
	// waits answer together); entered, when set, is told each wait.
	waiting, entered chan struct{}
}

// written is a command the writer was asked to decide, its family's
// fields side by side, so that a test reads any of them.
type written struct {
	decide.Header
	Value                json.RawMessage
	ExpectedVersion      *int64
	TTLSeconds           int64
	KeepTTL              bool
	Semantics            contract.Semantics
	SpecRef              string
	By                   int64
	Create               bool
	Min, Max             *int64
	Set                  map[string]json.RawMessage
	If                   *contract.FieldCondition
	MaxValueBytes        int
	Holder               string
	Member               string
	Start, Stop          int64
	Priority, Visibility int64
	DedupID              string
	ItemTTL, Delivery    int64
	Item, ReceiptNonce   string
	Txn                  []writtenStep
	// Wait is a DoWait's wait.
	Wait time.Duration
}

// writtenStep is a transaction's step as written records it.
type writtenStep struct {
	Req  *decide.KV
	Cond *contract.Condition
}

// writtenOf is c as written.
func writtenOf(c decide.Command) written {
	w := written{Header: *c.Head()}
	switch c := c.(type) {
	case *decide.KV:
		w.Value, w.ExpectedVersion, w.TTLSeconds, w.KeepTTL, w.Semantics, w.SpecRef = c.Value, c.ExpectedVersion, c.TTLSeconds, c.KeepTTL, c.Semantics, c.SpecRef
		w.By, w.Create, w.Min, w.Max, w.Set, w.If, w.MaxValueBytes = c.By, c.Create, c.Min, c.Max, c.Set, c.If, c.MaxValueBytes
	case *decide.Lock:
		w.Holder, w.TTLSeconds, w.Semantics, w.SpecRef = c.Holder, c.TTLSeconds, c.Semantics, c.SpecRef
	case *decide.Queue:
		w.ExpectedVersion, w.Value, w.TTLSeconds, w.Priority, w.DedupID, w.ItemTTL = c.ExpectedVersion, c.Value, c.TTLSeconds, c.Priority, c.DedupID, c.ItemTTL
		w.Visibility, w.Item, w.Delivery, w.ReceiptNonce = c.Visibility, c.Item, c.Delivery, c.ReceiptNonce
	case *decide.List:
		w.ExpectedVersion, w.Value, w.TTLSeconds, w.Start, w.Stop = c.ExpectedVersion, c.Value, c.TTLSeconds, c.Start, c.Stop
	case *decide.Set:
		w.ExpectedVersion, w.Member, w.TTLSeconds = c.ExpectedVersion, c.Member, c.TTLSeconds
	case *decide.Txn:
		w.Txn = make([]writtenStep, len(c.Steps))
		for i, s := range c.Steps {
			w.Txn[i] = writtenStep{Req: s.Write, Cond: s.Cond}
		}
	}
	return w
}

// deniedWrite is one AuditDenied call.
type deniedWrite struct {
	key                  string
	op                   contract.Op
	principal, requestID string
}

func (f *fakeWriter) AuditDenied(k contract.Key, op contract.Op, principal, requestID string) {
	f.denied = append(f.denied, deniedWrite{k.String(), op, principal, requestID})
}

func (f *fakeWriter) DoWait(ctx context.Context, c decide.Command, wait time.Duration) (writer.Result, error) {
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.waiting != nil {
		select {
		case <-f.waiting:
			return writer.Result{Entry: contract.Entry{Key: c.Head().Key.String(), Version: 7}}, nil
		case <-ctx.Done():
			return writer.Result{}, ctx.Err()
		}
	}
	res, err := f.Do(ctx, c)
	f.reqs[len(f.reqs)-1].Wait = wait
	return res, err
}

func (f *fakeWriter) Do(_ context.Context, c decide.Command) (writer.Result, error) {
	r := writtenOf(c)
	f.reqs = append(f.reqs, r)
	if r.Txn != nil {
		res := writer.Result{TxnID: "txn-1", Txn: make([]contract.TxnResult, len(r.Txn))}
		for i, s := range r.Txn {
			res.Txn[i] = contract.TxnResult{Key: s.Req.Key.String(), Version: 7, Value: s.Req.Value}
		}
		return res, nil
	}
	e := contract.Entry{Key: r.Key.String(), Version: 7, Value: r.Value, Semantics: r.Semantics}
	if r.Op.Purpose() != "" {
		e.Value = json.RawMessage(`{"holder":"` + r.Holder + `","token":7}`)
	}
	return writer.Result{Entry: e}, nil
}

func (f *fakeWriter) State(_ context.Context, k contract.Key) (keystate.State, error) {
	return f.states[k.String()], nil
}

func (f *fakeWriter) States(_ context.Context, ks []contract.Key) ([]keystate.State, contract.Cursor, error) {
	out := make([]keystate.State, len(ks))
	for i, k := range ks {
		out[i] = f.states[k.String()]
	}
	return out, contract.Cursor{Offset: -1}, nil
}

func (f *fakeWriter) Partition(k contract.Key) int32 { return changelog.Partition(k.Scope(), 4) }

func (f *fakeWriter) StateAt(ctx context.Context, k contract.Key) (keystate.State, contract.Cursor, error) {
	st, err := f.State(ctx, k)
	return st, contract.Cursor{Offset: -1}, err
}

func (f *fakeWriter) AwaitProjected(context.Context, string) (writer.Projected, error) {
	return writer.Projected{}, nil
}

func (f *fakeWriter) Ready() bool           { return true }
func (f *fakeWriter) ForwardLoops() []int32 { return nil }
func (f *fakeWriter) Route(contract.Key, writer.Origin) (bool, string, error) {
	return true, "", nil
}

// fakeLister lists nothing.
type fakeLister struct{}

func (fakeLister) List(context.Context, string, projection.Page) ([]contract.Entry, bool, error) {
	return nil, false, nil
}

func (fakeLister) Keys(context.Context, string, projection.Page) ([]contract.KeyInfo, bool, error) {
	return nil, false, nil
}

func (fakeLister) Projects(context.Context, projection.KeyRange, int, time.Time) ([]contract.ProjectInfo, error) {
	return nil, nil
}

func (fakeLister) Scan(context.Context, string, projection.Filter, projection.Page) ([]contract.Entry, string, error) {
	return nil, "", nil
}

const (
	token = "test-token-0123456789"
	key   = "/v1/kv/tenant/acme/project/demo/"
)

func mustServer(tb testing.TB, w *fakeWriter) http.Handler {
	tb.Helper()
	return serverWith(tb, w, api.DevToken(token))
}

// serverWith is a server around w that knows the tokens cfgs.
func serverWith(tb testing.TB, w api.Writer, cfgs ...api.TokenConfig) http.Handler {
	tb.Helper()
	tokens, err := api.NewTokens(cfgs)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: 1024}, w, fakeLister{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		tb.Fatal(err)
	}
	return s.Handler()
}

func serve(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, r)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestHandlersRejectBadInput: the 400 (and 413) paths answer their code
// and field without asking the writer.
func TestHandlersRejectBadInput(t *testing.T) {
	long := func(n int) string { return strings.Repeat("h", n) }
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code, field, message     string
	}{
		{"ErrKeyUppercase", "PUT", key + "Upper", `{"value":1}`, 400, contract.EInvalid, "key", ""},
		{"ErrKeyTooLong", "PUT", key + long(contract.MaxKeyLen), `{"value":1}`, 400, contract.EInvalid, "key", ""},
		{"ErrBodyNotJSON", "PUT", key + "k", `{"value":`, 400, contract.EInvalid, "", ""},
		{"ErrBodyEmpty", "POST", key + "k:increment", ``, 400, contract.EInvalid, "", "body is empty: send a JSON object"},
		{"ErrBodyTrailingData", "PUT", key + "k", `{"value":1} {}`, 400, contract.EInvalid, "", ""},
		{"ErrBodyTooLarge", "PUT", key + "k", `{"value":"` + long(20<<10) + `"}`, 413, contract.ETooLarge, "value", ""},
		{"ErrValueTooLarge", "PUT", key + "k", `{"value":"` + long(2000) + `"}`, 413, contract.ETooLarge, "value", ""},
		{"ErrUnknownField", "PUT", key + "k", `{"value":1,"expectedVersoin":1}`, 400, contract.EInvalid, "expectedVersoin", `unknown field "expectedVersoin"`},
		{"ErrUnknownSemanticsField", "POST", key + "k:increment", `{"semantics":{"owner":"x"}}`, 400, contract.EInvalid, "semantics.owner", ""},
		{"ErrFieldType", "POST", key + "k:increment", `{"by":"1"}`, 400, contract.EInvalid, "by", "field by must be an integer, not a string"},
		{"ErrFieldTypeNested", "PUT", key + "k", `{"value":1,"semantics":{"ttlSeconds":1.5}}`, 400, contract.EInvalid, "semantics.ttlSeconds",
			"field semantics.ttlSeconds must be an integer, not number 1.5"},
		{"ErrBodyNotObject", "PUT", key + "k", `["value"]`, 400, contract.EInvalid, "", "body must be a JSON object, not an array"},
		{"ErrBodyString", "POST", key + "k:acquire", `"holder"`, 400, contract.EInvalid, "", "body must be a JSON object, not a string"},
		{"ErrDuplicateMember", "PUT", key + "k", `{"value":3,"expectedVersion":999,"expectedVersion":null}`, 400, contract.EInvalid, "expectedVersion",
			`field "expectedVersion" is given twice`},
		{"ErrDuplicateSemanticsMember", "PUT", key + "k", `{"value":3,"semantics":{"purpose":"config","purpose":"lock"}}`, 400, contract.EInvalid, "semantics.purpose", ""},
		{"ErrDuplicateSetMember", "PATCH", key + "k", `{"set":{"a":1,"a":2}}`, 400, contract.EInvalid, "set.a", ""},
		{"ErrDuplicateMemberInValue", "PUT", key + "k", `{"value":{"a":{"b":1,"b":2}}}`, 400, contract.EInvalid, "value", `value names the member "b" twice in one object`},
		{"ErrDuplicateMemberInSetValue", "PATCH", key + "k", `{"set":{"a":{"b":1,"b":2}}}`, 400, contract.EInvalid, "set.a", ""},
		{"ErrDuplicateMemberInIfEquals", "PATCH", key + "k", `{"set":{"a":1},"if":{"field":"a","equals":{"b":1,"b":2}}}`, 400, contract.EInvalid, "if.equals", ""},
		{"ErrFieldWrongCase", "PUT", key + "k", `{"VALUE":5}`, 400, contract.EInvalid, "VALUE", `unknown field "VALUE" (names are case-sensitive: "value")`},
		{"ErrFieldWrongCaseBesideRight", "PUT", key + "k", `{"value":5,"Value":6}`, 400, contract.EInvalid, "Value", ""},
		{"ErrSemanticsFieldWrongCase", "POST", key + "k:acquire", `{"holder":"a","semantics":{"Producer":"p"}}`, 400, contract.EInvalid, "semantics.Producer", ""},
		{"ErrIfFieldWrongCase", "PATCH", key + "k", `{"set":{"a":1},"if":{"field":"a","Equals":1}}`, 400, contract.EInvalid, "if.Equals", ""},
		{"ErrPutTTLZero", "PUT", key + "k", `{"value":1,"ttlSeconds":0}`, 400, contract.EInvalid, "ttlSeconds", ""},
		{"ErrPutTTLOverMax", "PUT", key + "k", `{"value":1,"ttlSeconds":315360001}`, 400, contract.EInvalid, "ttlSeconds", "ttlSeconds must be between 1 and 315360000 (omit it for no expiry)"},
		{"ErrPutTTLsDiffer", "PUT", key + "k", `{"value":1,"ttlSeconds":5,"semantics":{"ttlSeconds":6}}`, 400, contract.EInvalid, "semantics.ttlSeconds", ""},
		{"ErrPurpose", "PUT", key + "k", `{"value":1,"semantics":{"purpose":"fun"}}`, 400, contract.EInvalid, "semantics.purpose", ""},
		{"ErrRequestIDTooLong", "PUT", key + "k", `{"value":1,"requestId":"` + long(contract.MaxRequestIDLen+1) + `"}`, 400, contract.EInvalid, "requestId", ""},
		{"ErrSpecRefTooLong", "PUT", key + "k", `{"value":1,"specRef":"` + long(contract.MaxSpecRefLen+1) + `"}`, 400, contract.EInvalid, "specRef", ""},
		{"ErrTooManyHints", "PUT", key + "k", `{"value":1,"semantics":{"consumerHints":[` + strings.Repeat(`"h",`, contract.MaxConsumerHints) + `"h"]}}`, 400, contract.EInvalid, "semantics.consumerHints", ""},
		{"ErrDeleteRepeatedParam", "DELETE", key + "k?expectedVersion=1&expectedVersion=2", ``, 400, contract.EInvalid, "expectedVersion", "expectedVersion is given 2 times"},
		{"ErrGetRepeatedField", "GET", key + "k?field=a&field=b", ``, 400, contract.EInvalid, "field", ""},
		{"ErrDeleteUnknownParam", "DELETE", key + "k?force=1", ``, 400, contract.EInvalid, "force", ""},
		{"ErrDeleteExpectedNotInt", "DELETE", key + "k?expectedVersion=x", ``, 400, contract.EInvalid, "expectedVersion", ""},
		{"ErrPostNoVerb", "POST", key + "k", `{}`, 400, contract.EInvalid, "key",
			"POST needs a verb after the key: tenant/acme/project/demo/k" + api.VerbList(false, true) + " (PUT writes a value)"},
		{"ErrPostUnknownVerb", "POST", key + "k:explode", `{}`, 400, contract.EInvalid, "key",
			`unknown verb "explode" (` + strings.Join(api.Verbs(false), ", ") + ")"},
		{"ErrPostReadVerb", "POST", key + "k:lock", `{}`, 400, contract.EInvalid, "key", ""},
		// A key may hold ':' (user:alice): a GET whose last ':' segment
		// is no verb reads that key.
		{"ErrGetUnknownVerbIsAKey", "GET", key + "k:bogus", ``, 404, contract.ENotFound, "key", ""},
		{"ErrGetWriteVerb", "GET", key + "k:acquire", ``, 400, contract.EInvalid, "key", ""},
		{"ErrGetUnknownParam", "GET", key + "k?other=a", ``, 400, contract.EInvalid, "other", `unknown query parameter "other" (field and at, on a plain GET)`},
		{"ErrGetFieldOnVerb", "GET", key + "k:lock?field=a", ``, 400, contract.EInvalid, "field", ""},
		{"ErrGetFieldTooLong", "GET", key + "k?field=" + long(contract.MaxFieldNameBytes+1), ``, 400, contract.EInvalid, "field", "field names must be 1 to 256 bytes"},
		{"ErrIncrementByZero", "POST", key + "k:increment", `{"by":0}`, 400, contract.EInvalid, "by", ""},
		{"ErrIncrementMaxBelowMin", "POST", key + "k:increment", `{"by":-1,"min":5,"max":4}`, 400, contract.EInvalid, "max", "max 4 is below min 5: no result could satisfy both"},
		{"ErrIncrementMinNotInteger", "POST", key + "k:increment", `{"min":0.5}`, 400, contract.EInvalid, "min", ""},
		{"ErrIncrementTTLOverMax", "POST", key + "k:increment", `{"ttlSeconds":315360001}`, 400, contract.EInvalid, "ttlSeconds",
			"ttlSeconds must be between 1 and 315360000 (omit it to keep the entry's expiry)"},
		{"ErrHolderMissing", "POST", key + "k:acquire", `{}`, 400, contract.EInvalid, "holder", ""},
		{"ErrHolderTooLong", "POST", key + "k:elect", `{"holder":"` + long(contract.MaxHolderLen+1) + `"}`, 400, contract.EInvalid, "holder", "holder is longer than 256 characters"},
		{"ErrHolderNUL", "POST", key + "k:acquire", `{"holder":"a\u0000"}`, 400, contract.EInvalid, "holder", ""},
		{"ErrLeaseOverMax", "POST", key + "k:heartbeat", `{"holder":"a","ttlSeconds":315360001}`, 400, contract.EInvalid, "ttlSeconds", ""},
		{"ErrReleaseTTL", "POST", key + "k:resign", `{"holder":"a","ttlSeconds":5}`, 400, contract.EInvalid, "ttlSeconds", "resign takes only holder, requestId and specRef"},
		{"ErrReleaseSemantics", "POST", key + "k:release", `{"holder":"a","semantics":{}}`, 400, contract.EInvalid, "semantics", ""},
		{"ErrLockPurpose", "POST", key + "k:elect", `{"holder":"a","semantics":{"purpose":"lock"}}`, 400, contract.EInvalid, "semantics.purpose", "a leader's purpose is leader"},
		{"ErrLockSemanticsTTL", "POST", key + "k:acquire", `{"holder":"a","semantics":{"ttlSeconds":5}}`, 400, contract.EInvalid, "semantics.ttlSeconds", ""},
		{"ErrPatchEmpty", "PATCH", key + "k", `{}`, 400, contract.EInvalid, "set", ""},
		{"ErrPatchTooManyFields", "PATCH", key + "k", `{"unset":[` + strings.Repeat(`"f",`, contract.MaxPatchFields) + `"f"]}`, 400, contract.EInvalid, "set", ""},
		{"ErrPatchFieldNameTooLong", "PATCH", key + "k", `{"set":{"` + long(contract.MaxFieldNameBytes+1) + `":1}}`, 400, contract.EInvalid, "set", ""},
		{"ErrPatchSetAndUnset", "PATCH", key + "k", `{"set":{"a":1},"unset":["a"]}`, 400, contract.EInvalid, "unset", ""},
		{"ErrPatchIfWithoutEquals", "PATCH", key + "k", `{"set":{"a":1},"if":{"field":"a"}}`, 400, contract.EInvalid, "if.equals", ""},
		{"ErrPatchSetValueTooLarge", "PATCH", key + "k", `{"set":{"a":"` + long(2000) + `"}}`, 413, contract.ETooLarge, "set.a", ""},
		{"ErrListLimit", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&limit=1001", ``, 400, contract.EInvalid, "limit", "limit must be an integer between 1 and 1000"},
		{"ErrListFilterOp", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&field=a&op=like&value=1", ``, 400, contract.EInvalid, "op",
			`op "like" is not one of eq, ne, lt, lte, gt, gte`},
		{"ErrListCursorNUL", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&cursor=dGVuYW50L2FjbWUvcHJvamVjdC9kZW1vL2EA", ``, 400, contract.EInvalid, "cursor", "cursor is not one this listing returned"},
		{"ErrListPrefixTwice", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&prefix=tenant/acme/project/other/", ``, 400, contract.EInvalid, "prefix", "prefix is given 2 times"},
		{"ErrListFilterPartial", "GET", "/v1/kv?prefix=tenant/acme/project/demo/&field=a", ``, 400, contract.EInvalid, "op", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			wantError(t, serve(mustServer(t, w), tc.method, tc.path, tc.body), tc.status, tc.code, tc.field, tc.message)
			if len(w.reqs) != 0 {
				t.Fatalf("the writer was asked %+v", w.reqs)
			}
		})
	}
}

// wantError checks an error answer's status, code, field and, when not
// empty, message, and returns its detail.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code, field, message string) contract.ErrorDetail {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d: %s", rec.Code, status, rec.Body)
	}
	var b contract.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %s: %v", rec.Body, err)
	}
	if b.Error.Code != code || b.Error.Field != field {
		t.Fatalf("code %s field %q, want %s %q: %s", b.Error.Code, b.Error.Field, code, field, b.Error.Message)
	}
	if message != "" && b.Error.Message != message {
		t.Fatalf("message %q, want %q", b.Error.Message, message)
	}
	return b.Error
}

// TestHandlersTranslate: accepted requests reach the writer as the op,
// defaults and semantics the contract says.
func TestHandlersTranslate(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		check                    func(t *testing.T, r written, answer string)
	}{
		{"OKPutDefaults", "PUT", key + "k", `{"value":{"a":1},"semantics":{"ttlSeconds":30}}`, func(t *testing.T, r written, _ string) {
			if r.Op != contract.OpPut || r.Semantics.Purpose != "other" || r.TTLSeconds != 30 || string(r.Value) != `{"a":1}` {
				t.Fatalf("request %+v", r)
			}
		}},
		{"OKIncrementStepOne", "POST", key + "k:increment", `{"create":true}`, func(t *testing.T, r written, _ string) {
			if r.Op != contract.OpIncrement || r.By != 1 || !r.Create || r.Semantics.Purpose != "" {
				t.Fatalf("request %+v", r)
			}
		}},
		{"OKIncrementBounds", "POST", key + "k:increment", `{"by":-2,"min":0,"max":100}`, func(t *testing.T, r written, _ string) {
			if r.Op != contract.OpIncrement || r.By != -2 || r.Min == nil || *r.Min != 0 || r.Max == nil || *r.Max != 100 {
				t.Fatalf("request %+v", r)
			}
		}},
		{"OKIncrementUnbounded", "POST", key + "k:increment", `{}`, func(t *testing.T, r written, _ string) {
			if r.Min != nil || r.Max != nil {
				t.Fatalf("bounds %v %v on an unbounded increment", r.Min, r.Max)
			}
		}},
		{"OKElectDefaultLease", "POST", key + "k:elect", `{"holder":"a","semantics":{"producer":"p"}}`, func(t *testing.T, r written, answer string) {
			if r.Op != contract.OpLeaderElect || r.TTLSeconds != contract.DefaultLockTTLSeconds || r.Semantics.Purpose != "leader" || r.Holder != "a" {
				t.Fatalf("request %+v", r)
			}
			if !strings.Contains(answer, `"reentered":false`) {
				t.Fatalf("answer %s", answer)
			}
		}},
		{"OKResign", "POST", key + "k:resign", `{"holder":"a"}`, func(t *testing.T, r written, answer string) {
			if r.Op != contract.OpLeaderResign || r.TTLSeconds != 0 || answer != `{"key":"tenant/acme/project/demo/k","version":7,"released":true}` {
				t.Fatalf("request %+v answer %s", r, answer)
			}
		}},
		{"OKPatchCompactsValues", "PATCH", key + "k", `{"set":{"a":{ "b" : 1 }},"if":{"field":"s","equals": "x" }}`, func(t *testing.T, r written, _ string) {
			if r.Op != contract.OpPatch || string(r.Set["a"]) != `{"b":1}` || string(r.If.Equals) != `"x"` || r.MaxValueBytes != 1024 {
				t.Fatalf("request %+v", r)
			}
		}},
		{"OKDelete", "DELETE", key + "k?expectedVersion=3&requestId=r", ``, func(t *testing.T, r written, answer string) {
			if r.Op != contract.OpDelete || *r.ExpectedVersion != 3 || r.RequestID != "r" || answer != `{"key":"tenant/acme/project/demo/k","version":7,"deleted":true}` {
				t.Fatalf("request %+v answer %s", r, answer)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			rec := serve(mustServer(t, w), tc.method, tc.path, tc.body)
			if rec.Code != http.StatusOK || len(w.reqs) != 1 {
				t.Fatalf("status %d, requests %+v: %s", rec.Code, w.reqs, rec.Body)
			}
			tc.check(t, w.reqs[0], strings.TrimSpace(rec.Body.String()))
		})
	}
}

// TestHandlersRead: the reads answer from the key's visible entry.
func TestHandlersRead(t *testing.T) {
	live := func(value, purpose string) keystate.State {
		return keystate.State{Version: 4, Live: true, Entry: contract.Entry{Key: "tenant/acme/project/demo/k", Version: 4,
			Value: json.RawMessage(value), Semantics: contract.Semantics{Purpose: purpose}}}
	}
	expired := func(s keystate.State) keystate.State {
		past := time.Now().Add(-time.Second)
		s.Entry.ExpiresAt = &past
		return s
	}
	for _, tc := range []struct {
		name, path  string
		state       keystate.State
		status      int
		code, field string
	}{
		{"OKGet", key + "k", live(`1`, "other"), 200, "", ""},
		{"OKGetField", key + "k?field=a", live(`{"a":1}`, "other"), 200, "", ""},
		{"OKLock", key + "k:lock", live(`{"holder":"h","token":4}`, "lock"), 200, "", ""},
		{"ErrGetAbsent", key + "k", keystate.State{}, 404, contract.ENotFound, "key"},
		{"ErrFieldAbsent", key + "k?field=b", live(`{"a":1}`, "other"), 404, contract.ENotFound, "field"},
		{"ErrFieldOfNonObject", key + "k?field=a", live(`1`, "other"), 409, contract.EWrongType, "field"},
		{"ErrLockFree", key + "k:lock", keystate.State{}, 404, contract.ENotFound, "key"},
		{"ErrLeaderOfLock", key + "k:leader", live(`{"holder":"h","token":4}`, "lock"), 409, contract.EWrongType, "key"},
		{"OKCounter", key + "k:counter", live(`42`, "counter"), 200, "", ""},
		{"ErrCounterAbsent", key + "k:counter", keystate.State{Version: 5}, 404, contract.ENotFound, "key"},
		{"ErrCounterExpired", key + "k:counter", expired(live(`42`, "counter")), 404, contract.ENotFound, "key"},
		{"ErrCounterNotInteger", key + "k:counter", live(`"42"`, "other"), 409, contract.EWrongType, "value"},
		{"ErrCounterUnknownParam", key + "k:counter?field=a", live(`42`, "counter"), 400, contract.EInvalid, "field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{states: map[string]keystate.State{"tenant/acme/project/demo/k": tc.state}}
			rec := serve(mustServer(t, w), "GET", tc.path, "")
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.code == "" {
				return
			}
			var b contract.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Code != tc.code || b.Error.Field != tc.field {
				t.Fatalf("error %+v (%v), want %s %s", b.Error, err, tc.code, tc.field)
			}
		})
	}
}

// TestEveryVerbHasAHandler: each custom method of the contract is served.
func TestEveryVerbHasAHandler(t *testing.T) {
	for _, op := range contract.Ops() {
		verb := op.Verb()
		if verb == "" {
			continue
		}
		method := map[bool]string{true: "GET", false: "POST"}[op.Reads()]
		rec := serve(mustServer(t, &fakeWriter{}), method, key+"k:"+verb, `{"holder":"a"}`)
		if strings.Contains(rec.Body.String(), "unknown verb") {
			t.Errorf("%s :%s: %s", method, verb, rec.Body)
		}
	}
}

// TestGetCounterAnswer: GET {key}:counter answers {key,value,version}.
func TestGetCounterAnswer(t *testing.T) {
	w := &fakeWriter{states: map[string]keystate.State{"tenant/acme/project/demo/visits": {Version: 9, Live: true,
		Entry: contract.Entry{Key: "tenant/acme/project/demo/visits", Version: 9, Value: json.RawMessage(`-3`)}}}}
	rec := serve(mustServer(t, w), "GET", key+"visits:counter", "")
	if got := strings.TrimSpace(rec.Body.String()); rec.Code != 200 || got != `{"key":"tenant/acme/project/demo/visits","value":-3,"version":9}` {
		t.Fatalf("%d %s", rec.Code, got)
	}
}

// TestKeysDecodedOnce: a key in the path is percent-decoded exactly once
// (secret%2531 is the key secret%31, which breaks the key rules, not
// secret1), whichever form echo routed on.
func TestKeysDecodedOnce(t *testing.T) {
	secret := keystate.State{Version: 1, Live: true, Entry: contract.Entry{Key: "tenant/acme/project/demo/secret1", Version: 1,
		Value: json.RawMessage(`"sk-live-SECRET"`)}}
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
	}{
		{"ErrGetDoubleEncoded", "GET", key + "secret%2531", "", 400},
		{"ErrGetDoubleEncodedVerb", "GET", key + "secret%2531:counter", "", 400},
		{"ErrGetDoubleEncodedColon", "GET", key + "secret1%253Alock", "", 400},
		{"ErrPutDoubleEncoded", "PUT", key + "secret%2531", `{"value":1}`, 400},
		{"ErrPostDoubleEncoded", "POST", key + "secret%2531:increment", `{}`, 400},
		{"ErrDeleteDoubleEncoded", "DELETE", key + "secret%2531", "", 400},
		{"ErrPatchDoubleEncoded", "PATCH", key + "secret%2531", `{"set":{"a":1}}`, 400},
		{"OKGetEncodedOnce", "GET", key + "secret%31", "", 200},
		{"OKGetEncodedSlashes", "GET", "/v1/kv/tenant%2Facme%2Fproject%2Fdemo%2Fsecret1", "", 200},
		{"OKPutEncodedOnce", "PUT", key + "secret%31", `{"value":1}`, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{states: map[string]keystate.State{secret.Entry.Key: secret}}
			rec := serve(mustServer(t, w), tc.method, tc.path, tc.body)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			if tc.status != 200 {
				var b contract.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Code != contract.EInvalid || b.Error.Field != "key" {
					t.Fatalf("error %s", rec.Body)
				}
				if len(w.reqs) != 0 || strings.Contains(rec.Body.String(), "SECRET") {
					t.Fatalf("requests %+v, answer %s", w.reqs, rec.Body)
				}
			}
			for _, r := range w.reqs {
				if r.Key.String() != secret.Entry.Key {
					t.Fatalf("wrote %s", r.Key)
				}
			}
		})
	}
}

// refusingWriter refuses every write with err.
type refusingWriter struct {
	fakeWriter
	err error
}

func (f *refusingWriter) Do(context.Context, decide.Command) (writer.Result, error) {
	return writer.Result{}, f.err
}

// TestConflictAnswersHideValues: a 409 tells the current value, and a
// message that may name it or a lock's holder, only to a principal that
// may read the key; a write-only principal gets code, field and version.
func TestConflictAnswersHideValues(t *testing.T) {
	const secret = "sk-live-SECRET123"
	cur := &contract.Entry{Key: "tenant/acme/project/demo/k", Version: 5, Value: json.RawMessage(`{"holder":"` + secret + `"}`)}
	const (
		rw        = "token-read-write-0123"
		writeOnly = "token-write-only-0123"
	)
	tokens, err := api.NewTokens([]api.TokenConfig{
		{Token: rw, Principal: "rw", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read, api.Write}}}},
		{Token: writeOnly, Principal: "wo", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Write}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{contract.EConflict, contract.EFieldMismatch, contract.EWrongType, contract.ELockHeld, contract.ENotLockHolder, contract.EOutOfRange} {
		e := contract.FieldErrorf(code, "holder", "key %s holds %s", cur.Key, cur.Value)
		e.Current = cur
		w := &refusingWriter{err: e}
		s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: 1024}, w, fakeLister{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, token string
			showValue   bool
		}{{"OKReaderSeesValue", rw, true}, {"OKWriterSeesVersionOnly", writeOnly, false}} {
			t.Run(code+"/"+tc.name, func(t *testing.T) {
				for _, r := range []struct{ method, path, body string }{
					{"PUT", key + "k", `{"value":1,"expectedVersion":999}`},
					{"PATCH", key + "k", `{"set":{"a":1},"expectedVersion":999}`},
					{"POST", key + "k:increment", `{}`},
					{"POST", key + "k:acquire", `{"holder":"h"}`},
					{"DELETE", key + "k?expectedVersion=1", ``},
				} {
					req := httptest.NewRequest(r.method, r.path, strings.NewReader(r.body))
					req.Header.Set("Authorization", "Bearer "+tc.token)
					req.Header.Set("Content-Type", "application/json")
					rec := httptest.NewRecorder()
					s.Handler().ServeHTTP(rec, req)
					var b contract.ErrorBody
					if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != http.StatusConflict || b.Error.Code != code {
						t.Fatalf("%s %s: %d %s", r.method, r.path, rec.Code, rec.Body)
					}
					if b.Error.CurrentVersion == nil || *b.Error.CurrentVersion != 5 || b.Error.Field != "holder" {
						t.Fatalf("%s %s: the version and field are for everyone: %s", r.method, r.path, rec.Body)
					}
					if got := strings.Contains(rec.Body.String(), secret); got != tc.showValue {
						t.Fatalf("%s %s: value shown %v, want %v: %s", r.method, r.path, got, tc.showValue, rec.Body)
					}
				}
			})
		}
	}
}

// TestBoundRefusalHidesValue: an increment refused by its min or max
// names the counter's value in its message, for a principal that may
// read the key. One that may not read it may not send a bound at all:
// 403 naming it, before the writer is asked (each answer would be a bit
// of the counter's value).
func TestBoundRefusalHidesValue(t *testing.T) {
	const counter = "918273645"
	cur := &contract.Entry{Key: "tenant/acme/project/demo/k", Version: 5, Value: json.RawMessage(counter)}
	tokens, err := api.NewTokens([]api.TokenConfig{
		{Token: "token-read-write-0123", Principal: "rw", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read, api.Write}}}},
		{Token: "token-write-only-0123", Principal: "wo", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Write}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, bound := range []string{"min", "max"} {
		e := contract.FieldErrorf(contract.EOutOfRange, bound, "the counter is %s: adding 1 would take it past %s 0", counter, bound)
		e.Current = cur
		w := &refusingWriter{err: e}
		s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: 1024}, w, fakeLister{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, token string
			status      int
			code        string
		}{{"OKReaderSeesValue", "token-read-write-0123", http.StatusConflict, contract.EOutOfRange}, {"ErrWriterMayNotBound", "token-write-only-0123", http.StatusForbidden, contract.EForbidden}} {
			t.Run(bound+"/"+tc.name, func(t *testing.T) {
				req := httptest.NewRequest("POST", key+"k:increment", strings.NewReader(`{"`+bound+`":0}`))
				req.Header.Set("Authorization", "Bearer "+tc.token)
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				s.Handler().ServeHTTP(rec, req)
				var b contract.ErrorBody
				if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != tc.status || b.Error.Code != tc.code || b.Error.Field != bound {
					t.Fatalf("answer %d %s", rec.Code, rec.Body)
				}
				if got, want := strings.Contains(rec.Body.String(), counter), tc.status == http.StatusConflict; got != want {
					t.Fatalf("value shown %v, want %v: %s", got, want, rec.Body)
				}
			})
		}
	}
}
