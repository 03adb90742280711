package api_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// The fakes' past: a time resolves to offset 7 of partition 0; key "old"
// held 1 at every point; a prefix held "a" and "b".

const pastKey = "tenant/acme/project/demo/old"

func (f *fakeWriter) AwaitPosition(context.Context, string, contract.Cursor) error { return nil }

func (fakeLister) OffsetAtTime(context.Context, int32, time.Time) (int64, error) { return 7, nil }

func (fakeLister) EntryAsOf(_ context.Context, key string, _ projection.AsOf) (*contract.Entry, error) {
	if key != pastKey {
		return nil, nil
	}
	return &contract.Entry{Key: key, Value: json.RawMessage(`1`), Version: 1}, nil
}

func (fakeLister) PageAsOf(_ context.Context, prefix string, _ *projection.Filter, _ projection.AsOf, pg projection.Page) ([]contract.Entry, bool, error) {
	var out []contract.Entry
	for _, k := range []string{prefix + "a", prefix + "b"} {
		if k > pg.After && len(out) < pg.Limit {
			out = append(out, contract.Entry{Key: k, Value: json.RawMessage(`1`)})
		}
	}
	return out, pg.After < prefix+"b" && len(out) == pg.Limit && out[len(out)-1].Key != prefix+"b", nil
}

func (l failingLister) OffsetAtTime(context.Context, int32, time.Time) (int64, error) {
	return 0, l.err
}
func (l failingLister) EntryAsOf(context.Context, string, projection.AsOf) (*contract.Entry, error) {
	return nil, l.err
}
func (l failingLister) PageAsOf(context.Context, string, *projection.Filter, projection.AsOf, projection.Page) ([]contract.Entry, bool, error) {
	return nil, false, l.err
}
func (l stubLister) OffsetAtTime(context.Context, int32, time.Time) (int64, error) { return 0, l.err }
func (l stubLister) EntryAsOf(context.Context, string, projection.AsOf) (*contract.Entry, error) {
	return nil, l.err
}
func (l stubLister) PageAsOf(context.Context, string, *projection.Filter, projection.AsOf, projection.Page) ([]contract.Entry, bool, error) {
	return nil, false, l.err
}

// TestReadsAtHandler: at= refuses what is not a position or a past time,
// a filter, a verb, a cursor without a position and one of another
// position than at's (400 naming
// the parameter); it answers the fold's entry (404 when absent) with the
// position it is as of, and pages whose cursors carry that position.
func TestReadsAtHandler(t *testing.T) {
	const list = "/v1/kv?prefix=tenant/acme/project/demo/"
	plainCursor := base64.RawURLEncoding.EncodeToString([]byte("tenant/acme/project/demo/a"))
	atCursor := "p0.o5." + plainCursor // a listing's cursor: its first page's position, then the key
	for _, tc := range []struct {
		name, path    string
		status        int
		code, field   string
		position, out string
	}{
		{"ErrAtText", key + "old?at=yesterday", 400, contract.EInvalid, "at", "", ""},
		{"ErrAtPosition", key + "old?at=p01.o3", 400, contract.EInvalid, "at", "", ""},
		{"ErrAtOffset", key + "old?at=p0.o-2", 400, contract.EInvalid, "at", "", ""},
		{"ErrAtFuture", key + "old?at=2999-01-01T00:00:00Z", 400, contract.EInvalid, "at", "", ""},
		{"ErrAtTwice", key + "old?at=p0.o1&at=p0.o2", 400, contract.EInvalid, "at", "", ""},
		{"ErrAtVerb", key + "old:history?at=p0.o1", 400, contract.EInvalid, "at", "", ""},
		{"ErrListAtText", list + "&at=now", 400, contract.EInvalid, "at", "", ""},
		{"ErrListAtFilter", list + "&at=p0.o1&field=a&op=eq&value=1", 400, contract.EInvalid, "field", "", ""},
		{"ErrListAtPlainCursor", list + "&at=p0.o1&cursor=" + plainCursor, 400, contract.EInvalid, "cursor", "", ""},
		// One cursor format: without at, an at= listing's cursor continues
		// the listing as of its position, as any listing's (listpage.go).
		{"OKListAtCursorPlain", list + "&cursor=" + atCursor, 200, "", "", "", ""},
		{"ErrListAtCursorOtherPosition", list + "&at=p0.o6&cursor=" + atCursor, 400, contract.EInvalid, "cursor", "", ""},
		{"ErrGone", key + "new?at=p0.o5", 404, contract.ENotFound, "key", "p0.o5", ""},
		{"OKPosition", key + "old?at=p0.o5", 200, "", "", "p0.o5", `1`},
		{"OKTime", key + "old?at=2020-01-01T00:00:00Z", 200, "", "", "p0.o7", `1`},
		{"OKField", key + "old?at=p0.o5&field=x", 409, contract.EWrongType, "field", "p0.o5", ""}, // ?field= reads the past entry
		{"OKList", list + "&at=p0.o5&limit=1", 200, "", "", "p0.o5", "a next p0.o5 tenant/acme/project/demo/a"},
		{"OKListKeysOnly", list + "&at=p0.o5&limit=1&keysOnly=true", 200, "", "", "p0.o5", "a next p0.o5 tenant/acme/project/demo/a"},
		{"OKListCursor", list + "&at=2020-01-01T00:00:00Z&limit=1&cursor=" + atCursor, 200, "", "", "p0.o5", "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(mustServer(t, &fakeWriter{}), "GET", tc.path, "")
			var e struct{ Error contract.Error }
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != tc.status || e.Error.Code != tc.code || e.Error.Field != tc.field || rec.Header().Get("Eskv-Position") != tc.position {
				t.Fatalf("%d %s %q, want %d %s on %q at %q", rec.Code, rec.Body, rec.Header().Get("Eskv-Position"), tc.status, tc.code, tc.field, tc.position)
			}
			if rec.Code == http.StatusOK {
				if got := answerOfPast(t, rec.Body.Bytes()); got != tc.out {
					t.Fatalf("answer %s, want %s", got, tc.out)
				}
			}
		})
	}
}

// answerOfPast is an entry's value, or a page's keys' last components
// and its next cursor decoded.
func answerOfPast(t *testing.T, b []byte) string {
	t.Helper()
	var a struct {
		Value      json.RawMessage
		Items      []contract.Entry
		NextCursor string
	}
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatal(err)
	}
	if a.Items == nil {
		return string(a.Value)
	}
	out := ""
	for _, e := range a.Items {
		out += e.Key[len(e.Key)-1:]
	}
	if a.NextCursor != "" {
		pos, k, _ := strings.Cut(a.NextCursor, ".o")
		off, k, _ := strings.Cut(k, ".")
		c, _ := base64.RawURLEncoding.DecodeString(k)
		out += " next " + pos + ".o" + off + " " + string(c)
	}
	return out
}

// TestReadsAtNeedTheReadRight: a principal that may write but not read
// is refused reads of the past as it is refused today's (403), before
// anything is read.
func TestReadsAtNeedTheReadRight(t *testing.T) {
	h := writeOnlyServer(t, &fakeWriter{})
	for _, path := range []string{key + "old?at=p0.o5", key + "old?at=2020-01-01T00:00:00Z", "/v1/kv?prefix=tenant/acme/project/demo/&at=p0.o5"} {
		rec := serveAs(h, writeOnlyToken, "GET", path, "")
		var b contract.ErrorBody
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != http.StatusForbidden || b.Error.Code != contract.EForbidden {
			t.Errorf("GET %s as write-only: %d %s, want 403", path, rec.Code, rec.Body)
		}
	}
}
