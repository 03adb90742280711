package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// The fakes answer sismember and smembers from nothing.

func (f *fakeWriter) Member(_ context.Context, k contract.Key, _ string) (keystate.State, int64, error) {
	return f.states[k.String()], 0, nil
}

func (fakeLister) Members(context.Context, string, string, int, time.Time) ([]string, string, error) {
	return []string{}, "", nil
}

func (l failingLister) Members(context.Context, string, string, int, time.Time) ([]string, string, error) {
	return nil, "", l.err
}

func (l stubLister) Members(context.Context, string, string, int, time.Time) ([]string, string, error) {
	return nil, "", l.err
}

// TestSetHandlers: the set routes refuse bad members and parameters
// (400 naming the field, nothing asked of the writer), carry the member
// in the body or the query, and answer a missing set as empty.
func TestSetHandlers(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"ErrMemberMissing", "POST", key + "s:sadd", `{}`, 400, "member"},
		{"ErrMemberTooLong", "POST", key + "s:sadd", `{"member":"` + strings.Repeat("m", contract.MaxMemberBytes+1) + `"}`, 400, "member"},
		{"ErrMemberNUL", "POST", key + "s:srem", `{"member":"a\u0000b"}`, 400, "member"},
		{"ErrUnknownField", "POST", key + "s:sadd", `{"member":"a","value":1}`, 400, "value"},
		{"ErrTTLZero", "POST", key + "s:sadd", `{"member":"a","ttlSeconds":0}`, 400, "ttlSeconds"},
		{"ErrIsMemberWithoutMember", "GET", key + "s:sismember", ``, 400, "member"},
		{"ErrIsMemberUnknownParam", "GET", key + "s:sismember?member=a&x=1", ``, 400, "x"},
		{"ErrMembersLimit", "GET", key + "s:smembers?limit=0", ``, 400, "limit"},
		{"ErrMembersCursor", "GET", key + "s:smembers?cursor=a*b", ``, 400, "cursor"},
		{"ErrCardParam", "GET", key + "s:scard?member=a", ``, 400, "member"},
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
	t.Run("OKMemberInBody", func(t *testing.T) {
		w := &fakeWriter{}
		member := "any content: /:?#%\u00e9 \"quoted\""
		b, _ := json.Marshal(map[string]string{"member": member})
		rec := serve(mustServer(t, w), "POST", key+"s:sadd", string(b))
		if rec.Code != http.StatusOK || len(w.reqs) != 1 || w.reqs[0].Member != member || w.reqs[0].Op != contract.OpSAdd {
			t.Fatalf("status %d %s, requests %+v", rec.Code, rec.Body, w.reqs)
		}
	})
	t.Run("OKMissingSetIsEmpty", func(t *testing.T) {
		h := mustServer(t, &fakeWriter{})
		for path, want := range map[string]string{
			key + "s:sismember?member=a%2Fb": `{"set":"` + strings.TrimPrefix(key, "/v1/kv/") + `s","isMember":false}`,
			key + "s:scard":                  `{"set":"` + strings.TrimPrefix(key, "/v1/kv/") + `s","size":0}`,
			key + "s:smembers":               `{"set":"` + strings.TrimPrefix(key, "/v1/kv/") + `s","members":[]}`,
		} {
			rec := serve(h, "GET", path, "")
			if rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != want {
				t.Errorf("GET %s: %d %s, want %s", path, rec.Code, rec.Body, want)
			}
		}
	})
}
