package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/writer"
)

const txnKey = "tenant/acme/project/demo/"

// txnOps is the JSON of n puts of distinct keys.
func txnOps(n int) string {
	ops := make([]string, n)
	for i := range ops {
		ops[i] = `{"op":"put","key":"` + txnKey + "k" + strconv.Itoa(i) + `","value":1}`
	}
	return strings.Join(ops, ",")
}

// TestTxnRejectsBadInput: a malformed transaction is answered 400 (or
// 413) naming the field and the op, and reaches no writer.
func TestTxnRejectsBadInput(t *testing.T) {
	put := func(k string) string { return `{"op":"put","key":"` + k + `","value":1}` }
	for _, tc := range []struct {
		name, body string
		status     int
		code       string
		field      string
		failedOp   int // -1: none
		message    string
	}{
		{"ErrNoOps", `{"ops":[]}`, 400, contract.EInvalid, "ops", -1, ""},
		{"ErrOpsMissing", `{}`, 400, contract.EInvalid, "ops", -1, ""},
		{"ErrTooManyOps", `{"ops":[` + txnOps(contract.MaxTxnOps+1) + `]}`, 400, contract.EInvalid, "ops", -1, "a transaction takes at most 100 ops, not 101"},
		{"ErrCrossProject", `{"ops":[` + put(txnKey+"a") + `,` + put("tenant/acme/project/other/b") + `]}`, 400, contract.EInvalid, "ops[1].key", 1, ""},
		{"ErrDuplicateKey", `{"ops":[` + put(txnKey+"a") + `,{"op":"delete","key":"` + txnKey + `a"}]}`, 400, contract.EInvalid, "ops[1].key", 1, ""},
		{"ErrBadOp", `{"ops":[{"op":"acquire","key":"` + txnKey + `a"}]}`, 400, contract.EInvalid, "ops[0].op", 0,
			`op 0: op "acquire" is not a transaction operation (put, delete, increment, patch or check)`},
		{"ErrBadKey", `{"ops":[` + put("tenant/acme/Upper") + `]}`, 400, contract.EInvalid, "ops[0].key", 0, ""},
		{"ErrMemberOfAnotherOp", `{"ops":[{"op":"delete","key":"` + txnKey + `a","by":2}]}`, 400, contract.EInvalid, "ops[0].by", 0, ""},
		{"ErrUnknownMember", `{"ops":[{"op":"put","key":"` + txnKey + `a","value":1,"expectedVersion":1}]}`, 400, contract.EInvalid, "ops[0].expectedVersion", 0, ""},
		{"ErrUnknownConditionMember", `{"ops":[{"op":"check","key":"` + txnKey + `a","condition":{"versoin":1}}]}`, 400, contract.EInvalid, "ops[0].condition.versoin", 0, ""},
		{"ErrMemberType", `{"ops":[` + put(txnKey+"a") + `,{"op":"increment","key":"` + txnKey + `b","by":"2"}]}`, 400, contract.EInvalid, "ops[1].by", 1, ""},
		{"ErrBadCondition", `{"ops":[{"op":"check","key":"` + txnKey + `a","condition":{"version":-2}}]}`, 400, contract.EInvalid, "ops[0].condition.version", 0, ""},
		{"ErrEmptyCondition", `{"ops":[{"op":"delete","key":"` + txnKey + `a","condition":{}}]}`, 400, contract.EInvalid, "ops[0].condition", 0, ""},
		{"ErrConditionEqualsNotJSONValue", `{"ops":[{"op":"check","key":"` + txnKey + `a","condition":{"field":"f","equals":{"b":1,"b":2}}}]}`, 400, contract.EInvalid, "ops[0].condition.equals", 0, ""},
		{"ErrCheckWithoutCondition", `{"ops":[{"op":"check","key":"` + txnKey + `a"}]}`, 400, contract.EInvalid, "ops[0].condition", 0, ""},
		{"ErrValueTooLarge", `{"ops":[` + put(txnKey+"a") + `,{"op":"put","key":"` + txnKey + `b","value":"` + strings.Repeat("x", 2000) + `"}]}`, 413, contract.ETooLarge, "ops[1].value", 1, ""},
		{"ErrPatchSetTooLarge", `{"ops":[{"op":"patch","key":"` + txnKey + `a","set":{"f":"` + strings.Repeat("x", 2000) + `"}}]}`, 413, contract.ETooLarge, "ops[0].set.f", 0, ""},
		{"ErrLockPurpose", `{"ops":[{"op":"put","key":"` + txnKey + `a","value":1,"semantics":{"purpose":"lock"}}]}`, 400, contract.EInvalid, "ops[0].semantics.purpose", 0, ""},
		{"ErrRequestIDTooLong", `{"requestId":"` + strings.Repeat("r", contract.MaxRequestIDLen+1) + `","ops":[` + put(txnKey+"a") + `]}`, 400, contract.EInvalid, "requestId", -1, ""},
		{"ErrQueryParam", `{"ops":[` + put(txnKey+"a") + `]}`, 400, contract.EInvalid, "force", -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			path := "/v1/txn"
			if tc.name == "ErrQueryParam" {
				path += "?force=1"
			}
			d := wantError(t, serve(mustServer(t, w), "POST", path, tc.body), tc.status, tc.code, tc.field, tc.message)
			if (tc.failedOp < 0) != (d.FailedOp == nil) || (tc.failedOp >= 0 && *d.FailedOp != tc.failedOp) {
				t.Fatalf("failedOp %v, want %d: %s", d.FailedOp, tc.failedOp, d.Message)
			}
			if len(w.reqs) != 0 {
				t.Fatalf("the writer was asked %+v", w.reqs)
			}
		})
	}
}

// Tokens of the authorization tests: writer may write w/ and read r/,
// reader may only read.
const (
	txnWriter = "token-txn-writer-0123"
	txnReader = "token-txn-reader-0123"
)

func txnServer(t *testing.T, w api.Writer) http.Handler {
	t.Helper()
	return serverWith(t, w,
		api.TokenConfig{Token: txnWriter, Principal: "writer", Grants: []api.Grant{
			{Prefix: txnKey + "w", Rights: []api.Right{api.Write}},
			{Prefix: txnKey + "r", Rights: []api.Right{api.Read}},
			{Prefix: txnKey + "rw", Rights: []api.Right{api.Read, api.Write}},
		}},
		api.TokenConfig{Token: txnReader, Principal: "reader", Grants: []api.Grant{{Prefix: txnKey, Rights: []api.Right{api.Read}}}})
}

func post(h http.Handler, token, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest("POST", "/v1/txn", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestTxnForbiddenNamesOp: a write needs the write right on its key, a
// check the read right, and a field condition, an increment's bounds or
// a large addend the read right too (decide.CheckBlind); the 403 names
// the first op refused and its parameter, and a refused write is handed
// to the audit trail.
func TestTxnForbiddenNamesOp(t *testing.T) {
	for _, tc := range []struct {
		name, token, body string
		failedOp          int    // -1: allowed
		field             string // the op's parameter at fault
		audited           contract.Op
	}{
		{"OKWriteAndCheck", txnWriter, `{"ops":[{"op":"put","key":"` + txnKey + `w/a","value":1},{"op":"check","key":"` + txnKey + `r/b","condition":{"exists":true}}]}`, -1, "", ""},
		{"OKVersionConditionOnWriteOnlyKey", txnWriter, `{"ops":[{"op":"patch","key":"` + txnKey + `w/a","set":{"a":1},"condition":{"version":3}}]}`, -1, "", ""},
		{"OKFieldConditionOnReadWriteKey", txnWriter, `{"ops":[{"op":"put","key":"` + txnKey + `rw/a","value":1,"condition":{"field":"a","equals":1}}]}`, -1, "", ""},
		{"ErrWriteOfReadOnlyKey", txnWriter, `{"ops":[{"op":"put","key":"` + txnKey + `w/a","value":1},{"op":"increment","key":"` + txnKey + `r/b"}]}`, 1, "key", contract.OpIncrement},
		{"ErrCheckOfWriteOnlyKey", txnWriter, `{"ops":[{"op":"check","key":"` + txnKey + `w/a","condition":{"version":1}}]}`, 0, "key", ""},
		{"ErrReaderWrites", txnReader, `{"ops":[{"op":"check","key":"` + txnKey + `a","condition":{"version":1}},{"op":"check","key":"` + txnKey + `b","condition":{"version":1}},{"op":"delete","key":"` + txnKey + `c"}]}`, 2, "key", contract.OpDelete},
		{"ErrFieldConditionOnWriteOnlyKey", txnWriter, `{"ops":[{"op":"put","key":"` + txnKey + `rw/a","value":1},{"op":"patch","key":"` + txnKey + `w/b","set":{"a":1},"condition":{"field":"a","equals":"guess"}}]}`, 1, "condition.field", contract.OpPatch},
		{"ErrIncrementMaxOnWriteOnlyKey", txnWriter, `{"ops":[{"op":"increment","key":"` + txnKey + `w/n","max":10}]}`, 0, "max", contract.OpIncrement},
		{"ErrIncrementBeyondBlindStep", txnWriter, `{"ops":[{"op":"increment","key":"` + txnKey + `w/n","by":9223372036854775807}]}`, 0, "by", contract.OpIncrement},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			rec := post(txnServer(t, w), tc.token, tc.body)
			if tc.failedOp < 0 {
				if rec.Code != 200 || len(w.reqs) != 1 {
					t.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
				return
			}
			var b contract.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != 403 || b.Error.Code != contract.EForbidden {
				t.Fatalf("want 403, got %d %s", rec.Code, rec.Body)
			}
			if b.Error.FailedOp == nil || *b.Error.FailedOp != tc.failedOp || b.Error.Field != "ops["+strconv.Itoa(tc.failedOp)+"]."+tc.field {
				t.Fatalf("the 403 must name op %d: %s", tc.failedOp, rec.Body)
			}
			if len(w.reqs) != 0 {
				t.Fatalf("the writer was asked %+v", w.reqs)
			}
			if tc.audited == "" {
				if len(w.denied) != 0 {
					t.Fatalf("a refused check is no denied write: %+v", w.denied)
				}
				return
			}
			if len(w.denied) != 1 || w.denied[0].op != tc.audited || !strings.HasPrefix(w.denied[0].key, txnKey) {
				t.Fatalf("audit %+v, want one denied %s", w.denied, tc.audited)
			}
		})
	}
}

// TestTxnTranslate: each op reaches the writer as the single-key write of
// the same op, its condition as the expected version (or a patch's if),
// its values compacted; the answer hides values the caller may not read.
func TestTxnTranslate(t *testing.T) {
	w := &fakeWriter{}
	rec := post(txnServer(t, w), txnWriter, `{"requestId":"rq","ops":[
		{"op":"put","key":"`+txnKey+`rw/a","value":{ "x" : 1 },"condition":{"exists":false},"ttlSeconds":60},
		{"op":"increment","key":"`+txnKey+`w/n","by":-2,"create":true,"condition":{"version":4}},
		{"op":"patch","key":"`+txnKey+`rw/o","set":{"s": "done" },"condition":{"field":"s","equals": "open" }},
		{"op":"delete","key":"`+txnKey+`w/d"},
		{"op":"put","key":"`+txnKey+`w/secret","value":"sk-SECRET"},
		{"op":"check","key":"`+txnKey+`r/lock","condition":{"version":9}}]}`)
	if rec.Code != 200 || len(w.reqs) != 1 {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	r := w.reqs[0]
	if r.Op != contract.OpTxn || r.RequestID != "rq" || r.Principal != "writer" || r.Key.String() != txnKey+"rw/a" || len(r.Txn) != 6 {
		t.Fatalf("request %+v", r)
	}
	steps := r.Txn
	check := func(i int, ok bool) {
		t.Helper()
		if !ok {
			t.Fatalf("step %d: %+v cond %+v", i, *steps[i].Req, steps[i].Cond)
		}
	}
	check(0, steps[0].Req.Op == contract.OpPut && string(steps[0].Req.Value) == `{"x":1}` && *steps[0].Req.ExpectedVersion == 0 && steps[0].Req.TTLSeconds == 60)
	check(1, steps[1].Req.Op == contract.OpIncrement && steps[1].Req.By == -2 && steps[1].Req.Create && *steps[1].Req.ExpectedVersion == 4)
	check(2, steps[2].Req.Op == contract.OpPatch && string(steps[2].Req.Set["s"]) == `"done"` && string(steps[2].Req.If.Equals) == `"open"` &&
		steps[2].Req.ExpectedVersion == nil && string(steps[2].Cond.Equals) == `"open"`)
	check(3, steps[3].Req.Op == contract.OpDelete && steps[3].Req.ExpectedVersion == nil && steps[3].Cond == nil)
	check(5, steps[5].Req.Op == contract.OpCheck && *steps[5].Cond.Version == 9)
	for i, s := range steps {
		// Blind: the caller may not read the step's key (w/…).
		check(i, s.Req.Principal == "writer" && s.Req.RequestID == "" && s.Req.Blind == strings.Contains(s.Req.Key.String(), "/w/"))
	}
	var a contract.TxnAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &a); err != nil || a.TxnID != "txn-1" || len(a.Results) != 6 {
		t.Fatalf("answer %s", rec.Body)
	}
	if string(a.Results[0].Value) != `{"x":1}` || strings.Contains(rec.Body.String(), "SECRET") {
		t.Fatalf("values are answered only for keys the caller may read: %s", rec.Body)
	}
}

// TestTxnConflictAnswer: a rejected transaction's 409 names the failing
// op, its code and the key's current version, and its value only to a
// caller who may read the key.
func TestTxnConflictAnswer(t *testing.T) {
	const secret = "sk-live-SECRET"
	for _, tc := range []struct {
		name, key string
		showValue bool
	}{{"OKReaderSeesValue", txnKey + "rw/a", true}, {"OKWriterSeesVersionOnly", txnKey + "w/a", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := contract.FieldErrorf(contract.EConflict, "condition.version", "expected version 1, current version is 3")
			e.Current = &contract.Entry{Key: tc.key, Version: 3, Value: json.RawMessage(`"` + secret + `"`)}
			w := &refusingWriter{err: contract.InOp(1, e)}
			rec := post(txnServer(t, w), txnWriter, `{"ops":[{"op":"put","key":"`+txnKey+`rw/b","value":1},{"op":"put","key":"`+tc.key+`","value":2,"condition":{"version":1}}]}`)
			var b contract.ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != 409 || b.Error.Code != contract.EConflict {
				t.Fatalf("%d %s", rec.Code, rec.Body)
			}
			if b.Error.FailedOp == nil || *b.Error.FailedOp != 1 || b.Error.Field != "ops[1].condition.version" || *b.Error.CurrentVersion != 3 {
				t.Fatalf("the 409 must name op 1 and version 3: %s", rec.Body)
			}
			if got := strings.Contains(rec.Body.String(), secret); got != tc.showValue {
				t.Fatalf("value shown %v, want %v: %s", got, tc.showValue, rec.Body)
			}
		})
	}
}

// TestTxnReplayedHeader: a replayed transaction says so.
func TestTxnReplayedHeader(t *testing.T) {
	w := &replayingWriter{}
	rec := post(txnServer(t, w), txnWriter, `{"requestId":"r","ops":[{"op":"delete","key":"`+txnKey+`w/a"}]}`)
	if rec.Code != 200 || rec.Header().Get("Eskv-Replayed") != "true" {
		t.Fatalf("%d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

type replayingWriter struct{ fakeWriter }

func (f *replayingWriter) Do(ctx context.Context, r decide.Command) (writer.Result, error) {
	res, err := f.fakeWriter.Do(ctx, r)
	res.Replayed = true
	return res, err
}

// remoteWriter owns no key: the owner is at url.
type remoteWriter struct {
	fakeWriter
	url string
}

func (f *remoteWriter) Route(contract.Key, writer.Origin) (bool, string, error) {
	return false, f.url, nil
}

// TestTxnForwardsWholeBody: a writer that does not own the project
// forwards the transaction, whose body it has read, to the owner intact.
func TestTxnForwardsWholeBody(t *testing.T) {
	body := `{"requestId":"r","ops":[` + txnOps(3) + `]}`
	var got, by string
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, by = string(b), r.Header.Get(api.ForwardedHeader)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"txnId":"t","results":[]}`))
	}))
	defer owner.Close()
	w := &remoteWriter{url: owner.URL}
	rec := post(txnServer(t, w), txnWriter, strings.ReplaceAll(body, txnKey, txnKey+"w/"))
	body = strings.ReplaceAll(body, txnKey, txnKey+"w/")
	if rec.Code != 200 || got != body || by == "" || len(w.reqs) != 0 {
		t.Fatalf("status %d; the owner got %q (forwarded by %q); local requests %d", rec.Code, got, by, len(w.reqs))
	}
}

// TestTxnOversizeRefusedBeforeItsBodyIsSent: a transaction whose
// declared length is over the limit, sent with Expect: 100-continue, is
// answered 413 without the server asking for its body (no 100 Continue):
// a client sending a large body that way is refused before sending it,
// and does not meet the reset that closing over an unread body can
// bring (docs/api.md, 413).
func TestTxnOversizeRefusedBeforeItsBodyIsSent(t *testing.T) {
	w := &fakeWriter{}
	srv := httptest.NewServer(txnServer(t, w))
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Minute}}
	defer hc.CloseIdleConnections()
	body := &countingReader{r: xs{}} // ui_test.go
	req, err := http.NewRequest("POST", srv.URL+"/v1/txn", body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 6 << 20
	req.Header.Set("Expect", "100-continue")
	req.Header.Set("Authorization", "Bearer "+txnWriter)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e contract.ErrorBody
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 413 || e.Error.Code != contract.ETooLarge {
		t.Fatalf("answer %d %+v, want 413 %s", resp.StatusCode, e.Error, contract.ETooLarge)
	}
	if body.n != 0 || time.Since(start) > 30*time.Second {
		t.Fatalf("%d bytes of the body sent (after %s): the server asked for a body it refuses", body.n, time.Since(start))
	}
	if len(w.reqs) != 0 {
		t.Fatalf("the writer was asked %+v", w.reqs)
	}
}
