package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

const base = "/v1/kv/tenant/acme/project/demo/"

func TestPutGetDelete(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	key := base + "checkpoint"

	r := s.do("PUT", key, devToken, `{"value":{"cursor":1},"expectedVersion":0,"semantics":{"purpose":"checkpoint","producer":"harvester"},"requestId":"r1","specRef":"adr-7"}`)
	if r.Status != http.StatusOK {
		t.Fatalf("create: %d %s", r.Status, r.Body)
	}
	e := r.entry(t)
	if e.Version != 1 || string(e.Value) != `{"cursor":1}` || e.LastWriter != "dev" || e.Semantics.Purpose != "checkpoint" || e.SpecRef != "adr-7" {
		t.Fatalf("create answered %+v", e)
	}

	r = s.do("GET", key, devToken, nil)
	if got := r.entry(t); r.Status != 200 || got.Version != 1 || string(got.Value) != `{"cursor":1}` {
		t.Fatalf("get: %d %s", r.Status, r.Body)
	}

	r = s.do("PUT", key, devToken, `{"value":{"cursor":2},"expectedVersion":1}`)
	if got := r.entry(t); r.Status != 200 || got.Version != 2 || !got.CreatedAt.Equal(e.CreatedAt) {
		t.Fatalf("cas: %d %s", r.Status, r.Body)
	}

	r = s.do("PUT", key, devToken, `{"value":{"cursor":3},"expectedVersion":1}`)
	if r.Status != http.StatusConflict {
		t.Fatalf("stale cas: want 409, got %d %s", r.Status, r.Body)
	}
	if d := r.errorBody(t); d.Code != "version_conflict" || d.CurrentVersion == nil || *d.CurrentVersion != 2 || string(d.CurrentValue) != `{"cursor":2}` || d.CorrelationID == "" {
		t.Fatalf("stale cas answered %+v", d)
	}

	r = s.do("DELETE", key+"?expectedVersion=2", devToken, nil)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"version":3`) {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	if r = s.do("GET", key, devToken, nil); r.Status != http.StatusNotFound || r.errorBody(t).Code != "not_found" {
		t.Fatalf("get after delete: %d %s", r.Status, r.Body)
	}
	if r = s.do("DELETE", key, devToken, nil); r.Status != http.StatusNotFound {
		t.Fatalf("delete again: %d %s", r.Status, r.Body)
	}
	// Versions never go back: a re-create continues after the delete.
	r = s.do("PUT", key, devToken, `{"value":"again","expectedVersion":0}`)
	if got := r.entry(t); r.Status != 200 || got.Version != 4 {
		t.Fatalf("re-create: %d %s", r.Status, r.Body)
	}
}

func TestValueBytesRoundTrip(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	const v = `{"html":"<b>&amp;</b>","n":1.50,"u":"é"}`
	if r := s.do("PUT", base+"bytes", devToken, `{"value":`+v+`}`); r.Status != 200 || string(r.entry(t).Value) != v {
		t.Fatalf("put answered %d %s", r.Status, r.Body)
	}
	waitProjected(t, s)
	if r := s.do("GET", base+"bytes", devToken, nil); string(r.entry(t).Value) != v {
		t.Fatalf("get answered %s, want the value's bytes %s", r.Body, v)
	}
}

// TestTTLHidesExpiredEntries: an entry past its expiry is absent at once,
// before any expire event: create-if-absent succeeds on it as its next
// version. The sweeper is off: its expire event, appended between the
// read and the create on a loaded machine, made the create version 3
// (TestSweeperExpiresEntries tests the sweeper).
func TestTTLHidesExpiredEntries(t *testing.T) {
	t.Parallel()
	s := mustStack(t, inproc.WriterConfig(func(c *writer.Config) { c.SweepInterval = -1 }))
	key := base + "lease"
	r := s.do("PUT", key, devToken, `{"value":"me","ttlSeconds":1,"semantics":{"purpose":"checkpoint"}}`)
	e := r.entry(t)
	if r.Status != 200 || e.ExpiresAt == nil || e.Semantics.TTLSeconds != 1 {
		t.Fatalf("put with ttl: %d %s", r.Status, r.Body)
	}
	testenv.WaitFor(t, 5*e.ExpiresAt.Sub(e.UpdatedAt)+2e9, "expiry", func() bool {
		return s.do("GET", key, devToken, nil).Status == http.StatusNotFound
	})
	// An expired entry is absent: create-if-absent succeeds on it.
	r = s.do("PUT", key, devToken, `{"value":"you","expectedVersion":0}`)
	if got := r.entry(t); r.Status != 200 || got.Version != 2 {
		t.Fatalf("create over expired: %d %s", r.Status, r.Body)
	}
}

func TestRequestIDIdempotency(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	key := base + "idem"
	body := `{"value":{"n":1},"expectedVersion":0,"requestId":"job-42"}`
	first := s.do("PUT", key, devToken, body)
	if first.Status != 200 {
		t.Fatalf("first: %d %s", first.Status, first.Body)
	}
	again := s.do("PUT", key, devToken, body)
	if again.Status != 200 || again.Header.Get("Eskv-Replayed") != "true" {
		t.Fatalf("replay: %d %s", again.Status, again.Body)
	}
	if a, b := first.entry(t), again.entry(t); a.Version != b.Version || !a.UpdatedAt.Equal(b.UpdatedAt) {
		t.Fatalf("replay answered a different entry: %+v vs %+v", a, b)
	}
	other := s.do("PUT", key, devToken, `{"value":{"n":2},"expectedVersion":0,"requestId":"job-42"}`)
	if other.Status != http.StatusConflict || other.errorBody(t).Field != "requestId" {
		t.Fatalf("reused requestId with another body: %d %s", other.Status, other.Body)
	}
	if got := s.do("GET", key, devToken, nil).entry(t); got.Version != 1 {
		t.Fatalf("replays created versions: %+v", got)
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"ErrNoToken", "GET", base + "x", "", "", 401, "unauthenticated"},
		{"ErrUnknownToken", "GET", base + "x", "not-a-token-at-all-xxxxx", "", 401, "unauthenticated"},
		{"ErrOtherTenant", "PUT", "/v1/kv/tenant/globex/project/p/x", acmeToken, `{"value":1}`, 403, "forbidden"},
		{"ErrReadOnlyWrites", "PUT", base + "x", readerTok, `{"value":1}`, 403, "forbidden"},
		{"ErrListOtherTenant", "GET", "/v1/kv?prefix=tenant/globex/project/p/", acmeToken, "", 403, "forbidden"},
		{"OKOwnTenant", "PUT", base + "x", acmeToken, `{"value":1}`, 200, ""},
		{"OKReaderReads", "GET", base + "x", readerTok, "", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := s.do(tc.method, tc.path, tc.token, body)
			if r.Status != tc.status {
				t.Fatalf("want %d, got %d %s", tc.status, r.Status, r.Body)
			}
			if tc.code != "" && r.errorBody(t).Code != tc.code {
				t.Fatalf("want code %s, got %s", tc.code, r.Body)
			}
		})
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	for i := range 25 {
		if r := s.do("PUT", fmt.Sprintf("%sjobs/%03d", base, i), devToken, map[string]any{"value": i}); r.Status != 200 {
			t.Fatalf("put: %d %s", r.Status, r.Body)
		}
	}
	s.do("PUT", base+"other", devToken, `{"value":0}`)
	waitProjected(t, s)

	var keys []string
	cursor := ""
	for pages := 0; ; pages++ {
		path := "/v1/kv?prefix=tenant/acme/project/demo/jobs/&limit=10"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := s.do("GET", path, devToken, nil)
		var a struct {
			Items []struct {
				Key string `json:"key"`
			} `json:"items"`
			Count      int    `json:"count"`
			Truncated  bool   `json:"truncated"`
			NextCursor string `json:"nextCursor"`
		}
		if err := json.Unmarshal(r.Body, &a); err != nil || r.Status != 200 {
			t.Fatalf("list: %d %s", r.Status, r.Body)
		}
		if a.Count != len(a.Items) || (pages < 2) != a.Truncated {
			t.Fatalf("page %d: count %d truncated %v", pages, a.Count, a.Truncated)
		}
		for _, it := range a.Items {
			keys = append(keys, it.Key)
		}
		if !a.Truncated {
			break
		}
		cursor = a.NextCursor
	}
	if len(keys) != 25 || keys[0] != "tenant/acme/project/demo/jobs/000" || keys[24] != "tenant/acme/project/demo/jobs/024" {
		t.Fatalf("listed %d keys: %v", len(keys), keys)
	}
	for i := 1; i < len(keys); i++ {
		if keys[i-1] >= keys[i] {
			t.Fatalf("keys not sorted at %d: %v", i, keys)
		}
	}
}
