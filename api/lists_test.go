package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
)

// The fakes answer lrange from nothing.

func (fakeLister) Range(context.Context, string, int64, int64, projection.Page) ([]json.RawMessage, bool, error) {
	return []json.RawMessage{}, false, nil
}

func (l failingLister) Range(context.Context, string, int64, int64, projection.Page) ([]json.RawMessage, bool, error) {
	return nil, false, l.err
}

func (l stubLister) Range(context.Context, string, int64, int64, projection.Page) ([]json.RawMessage, bool, error) {
	return nil, false, l.err
}

// TestListHandlers: the list routes refuse bad values, ranges and
// parameters (400 naming the field, nothing asked of the writer), carry
// the value, the range and the end in the request, and answer a missing
// list as empty.
func TestListHandlers(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"ErrPushNoValue", "POST", key + "l:lpush", `{}`, 400, "value"},
		{"ErrPushBadJSON", "POST", key + "l:rpush", `{"value":tru}`, 400, ""},
		{"ErrPushUnknownField", "POST", key + "l:rpush", `{"value":1,"member":"a"}`, 400, "member"},
		{"ErrPushTTLZero", "POST", key + "l:lpush", `{"value":1,"ttlSeconds":0}`, 400, "ttlSeconds"},
		{"ErrPopUnknownField", "POST", key + "l:lpop", `{"value":1}`, 400, "value"},
		{"ErrTrimNoStart", "POST", key + "l:ltrim", `{"stop":9}`, 400, "start"},
		{"ErrTrimNoStop", "POST", key + "l:ltrim", `{"start":0}`, 400, "stop"},
		{"ErrRangeNoStart", "GET", key + "l:lrange?stop=9", ``, 400, "start"},
		{"ErrRangeBadStop", "GET", key + "l:lrange?start=0&stop=x", ``, 400, "stop"},
		{"ErrRangeUnknownParam", "GET", key + "l:lrange?start=0&stop=1&limit=2", ``, 400, "limit"},
		{"ErrLenParam", "GET", key + "l:llen?start=0", ``, 400, "start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &fakeWriter{}
			rec := serve(mustServer(t, w), tc.method, tc.path, tc.body)
			var e struct{ Error contract.Error }
			_ = json.Unmarshal(rec.Body.Bytes(), &e)
			if rec.Code != tc.status || e.Error.Field != tc.field {
				t.Fatalf("status %d field %q (%s), want %d %q", rec.Code, e.Error.Field, rec.Body, tc.status, tc.field)
			}
			if len(w.reqs) != 0 {
				t.Fatalf("the writer was asked %v", w.reqs)
			}
		})
	}
	t.Run("OKRequests", func(t *testing.T) {
		w := &fakeWriter{}
		h := mustServer(t, w)
		for _, r := range []struct{ path, body string }{
			{key + "l:lpush", `{"value": {"a": 1}}`},
			{key + "l:rpush", `{"value":"Task 123","requestId":"r1"}`},
			{key + "l:lpop", ``},
			{key + "l:rpop", `{}`},
			{key + "l:ltrim", `{"start":0,"stop":-1}`},
		} {
			if rec := serve(h, "POST", r.path, r.body); rec.Code != http.StatusOK {
				t.Fatalf("POST %s: %d %s", r.path, rec.Code, rec.Body)
			}
		}
		if len(w.reqs) != 5 {
			t.Fatalf("requests %+v", w.reqs)
		}
		if r := w.reqs[0]; r.Op != contract.OpLPush || string(r.Value) != `{"a":1}` {
			t.Errorf("lpush %+v", r)
		}
		if r := w.reqs[1]; r.Op != contract.OpRPush || string(r.Value) != `"Task 123"` || r.RequestID != "r1" {
			t.Errorf("rpush %+v", r)
		}
		if w.reqs[2].Op != contract.OpLPop || w.reqs[3].Op != contract.OpRPop {
			t.Errorf("pops %+v %+v", w.reqs[2], w.reqs[3])
		}
		if r := w.reqs[4]; r.Op != contract.OpLTrim || r.Start != 0 || r.Stop != -1 {
			t.Errorf("ltrim %+v", r)
		}
	})
	t.Run("OKMissingListIsEmpty", func(t *testing.T) {
		h := mustServer(t, &fakeWriter{})
		list := strings.TrimPrefix(key, "/v1/kv/") + "l"
		for path, want := range map[string]string{
			key + "l:llen":                   `{"list":"` + list + `","length":0}`,
			key + "l:lrange?start=0&stop=99": `{"list":"` + list + `","values":[]}`,
		} {
			rec := serve(h, "GET", path, "")
			if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
				t.Errorf("GET %s: %d %s, want %s", path, rec.Code, rec.Body, want)
			}
		}
	})
}
