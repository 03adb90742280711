package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// Reads of many keys (docs/api.md): keys-only listings, batch gets and
// the projects listing, against the in-process stack.

// manyKeysTokens are the tokens of these tests besides the dev token
// (which reads everything): one per tenant, one per project, one below a
// project.
var manyKeysTokens = []api.TokenConfig{
	{Token: "tok-acme-0123456789abcdef", Principal: "acme", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read}}}},
	{Token: "tok-demo-0123456789abcdef", Principal: "demo", Grants: []api.Grant{{Prefix: "tenant/acme/project/demo/", Rights: rw}}},
	{Token: "tok-docs-0123456789abcdef", Principal: "docs", Grants: []api.Grant{{Prefix: "tenant/globex/project/web/docs", Rights: []api.Right{api.Read}},
		{Prefix: "tenant/acme/project/empty", Rights: []api.Right{api.Read}}}},
	{Token: "tok-wonly-0123456789abcdef", Principal: "wonly", Grants: []api.Grant{{Prefix: "tenant/", Rights: []api.Right{api.Write}}}},
}

func manyKeysStack(t *testing.T) *stack {
	tokens, err := api.NewTokens(append([]api.TokenConfig{api.DevToken(devToken)}, manyKeysTokens...))
	if err != nil {
		t.Fatal(err)
	}
	st := inproc.MustRun(t, inproc.Partitions(partitions))
	srv, err := api.New(api.Config{Tokens: tokens}, st.Writer, st.Store, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &stack{tb: t, broker: st.Broker, pg: st.Postgres, store: st.Store, url: hs.URL}
}

func mustPut(t *testing.T, s *stack, key, body string) {
	t.Helper()
	if r := s.do("PUT", "/v1/kv/"+key, devToken, body); r.Status != 200 {
		t.Fatalf("PUT %s: %d %s", key, r.Status, r.Body)
	}
}

// TestKeysOnlyListing: keysOnly=true answers key, version, purpose and
// expiry of the listing's keys, no value, paged by the same cursor; bad
// uses are 400 naming the parameter.
func TestKeysOnlyListing(t *testing.T) {
	t.Parallel()
	s := manyKeysStack(t)
	const p = "tenant/acme/project/keys/"
	mustPut(t, s, p+"a", `{"value":{"secret":"VALUE-a"},"semantics":{"purpose":"config"}}`)
	mustPut(t, s, p+"b", `{"value":2,"semantics":{"purpose":"counter"},"ttlSeconds":3600}`)
	mustPut(t, s, p+"b", `{"value":3,"keepTtl":true}`)
	mustPut(t, s, p+"c/d", `{"value":"VALUE-c"}`)
	r := s.do("GET", "/v1/kv?prefix="+p+"&keysOnly=true", devToken, nil)
	var a contract.KeysAnswer
	if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil {
		t.Fatalf("keys-only listing: %d %s", r.Status, r.Body)
	}
	if strings.Contains(string(r.Body), "VALUE-") || strings.Contains(string(r.Body), `"value"`) {
		t.Errorf("a keys-only listing carries values: %s", r.Body)
	}
	if a.Count != 3 || a.Truncated || len(a.Items) != 3 || a.Items[0].Purpose != "config" || a.Items[1].Version != 2 ||
		a.Items[1].Purpose != "counter" || a.Items[1].ExpiresAt == nil || a.Items[2].Key != p+"c/d" || a.Items[2].ExpiresAt != nil {
		t.Errorf("keys-only listing = %s", r.Body)
	}
	r = s.do("GET", "/v1/kv?prefix="+p+"&keysOnly=true&limit=2", devToken, nil)
	if err := json.Unmarshal(r.Body, &a); err != nil || !a.Truncated || a.Count != 2 || a.NextCursor == "" {
		t.Fatalf("first page of 2: %d %s", r.Status, r.Body)
	}
	r = s.do("GET", "/v1/kv?prefix="+p+"&keysOnly=true&limit=2&cursor="+a.NextCursor, devToken, nil)
	if err := json.Unmarshal(r.Body, &a); err != nil || a.Truncated || a.Count != 1 || a.Items[0].Key != p+"c/d" {
		t.Errorf("second page: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct{ query, field string }{
		{"&keysOnly=yes", "keysOnly"},
		{"&keysOnly=true&limit=10001", "limit"},
		{"&keysOnly=true&field=a&op=eq&value=1", "keysOnly"},
		{"&keysOnly=true&keysOnly=true", "keysOnly"},
	} {
		r := s.do("GET", "/v1/kv?prefix="+p+tc.query, devToken, nil)
		if r.Status != 400 || r.errorBody(t).Field != tc.field {
			t.Errorf("GET ?prefix=%s%s: %d %s, want 400 naming %s", p, tc.query, r.Status, r.Body, tc.field)
		}
	}
	if r := s.do("GET", "/v1/kv?prefix="+p+"&keysOnly=true&limit=10000", devToken, nil); r.Status != 200 {
		t.Errorf("limit 10000: %d %s", r.Status, r.Body)
	}
	if r := s.do("GET", "/v1/kv?prefix=tenant/acme/project/keys/&keysOnly=true", "tok-wonly-0123456789abcdef", nil); r.Status != 403 {
		t.Errorf("keys-only listing by a write-only token: %d %s, want 403", r.Status, r.Body)
	}
}

// batchGet posts a batch get of keys with token and decodes its answer.
func batchGet(t *testing.T, s *stack, token string, keys ...string) (response, contract.BatchGetAnswer) {
	t.Helper()
	r := s.do("POST", "/v1/kv:batchGet", token, contract.BatchGetBody{Keys: keys})
	var a contract.BatchGetAnswer
	if r.Status == 200 {
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatalf("batch get answer %s: %v", r.Body, err)
		}
	}
	return r, a
}

// TestBatchGet: each key answered in the body's order as GET answers it
// (entry, not_found), keys the token may not read forbidden whether they
// exist or not, keys of several projects and partitions in one request;
// bad bodies are 400 naming keys[i].
func TestBatchGet(t *testing.T) {
	t.Parallel()
	s := manyKeysStack(t)
	var keys []string
	for i := range 8 {
		k := fmt.Sprintf("tenant/acme/project/p%d/k", i)
		mustPut(t, s, k, fmt.Sprintf(`{"value":{"n":%d}}`, i))
		keys = append(keys, k)
	}
	mustPut(t, s, "tenant/acme/project/demo/secret", `{"value":"SECRET-demo"}`)
	if r := s.do("POST", "/v1/kv/tenant/acme/project/demo/l:acquire", devToken, `{"holder":"SECRET-holder"}`); r.Status != 200 {
		t.Fatalf("acquire: %d %s", r.Status, r.Body)
	}
	asked := append([]string{"tenant/acme/project/demo/missing"}, keys...)
	asked = append(asked, "tenant/acme/project/demo/secret", "tenant/acme/project/demo/l")
	r, a := batchGet(t, s, devToken, asked...)
	if r.Status != 200 || len(a.Items) != len(asked) || a.Truncated {
		t.Fatalf("batch get: %d %s", r.Status, r.Body)
	}
	if e := a.Items[0].Error; e == nil || e.Code != "not_found" || e.Field != "keys[0]" || a.Items[0].Entry != nil {
		t.Errorf("missing key: %+v", a.Items[0])
	}
	for i, k := range keys {
		it := a.Items[i+1]
		if it.Key != k || it.Entry == nil || string(it.Entry.Value) != fmt.Sprintf(`{"n":%d}`, i) || it.Partition == nil {
			t.Errorf("item %d = %+v, want %s's entry", i+1, it, k)
		}
	}
	if len(a.Partitions) < 2 {
		t.Errorf("partitions read = %v, want the keys' several", a.Partitions)
	}
	// Each partition tells the position its keys were read at: with
	// nothing written since, the one a GET of a key of it answers.
	for _, pr := range a.Partitions {
		for i, it := range a.Items {
			if it.Partition == nil || *it.Partition != pr.Partition {
				continue
			}
			g := s.do("GET", "/v1/kv/"+asked[i], devToken, nil)
			if pos := g.Header.Get("ESKV-Position"); pr.Position == "" || pr.Position != pos {
				t.Errorf("partition %d read at %q; a GET of %s answers %q", pr.Partition, pr.Position, asked[i], pos)
			}
			break
		}
	}
	// The demo token reads demo's keys only: the others are forbidden,
	// the answer the same for a key that exists and one that does not.
	r, a = batchGet(t, s, "tok-demo-0123456789abcdef", "tenant/acme/project/p0/k", "tenant/acme/project/p0/nope", "tenant/acme/project/demo/secret")
	if r.Status != 200 || len(a.Items) != 3 {
		t.Fatalf("batch get as demo: %d %s", r.Status, r.Body)
	}
	for i := range 2 {
		if e := a.Items[i].Error; e == nil || e.Code != "forbidden" || a.Items[i].Partition != nil || a.Items[i].Entry != nil {
			t.Errorf("item %d as demo = %+v, want forbidden", i, a.Items[i])
		}
	}
	if a.Items[0].Error.Message != strings.Replace(a.Items[1].Error.Message, "nope", "k", 1) {
		t.Errorf("forbidden messages differ beyond the key: %q, %q", a.Items[0].Error.Message, a.Items[1].Error.Message)
	}
	if it := a.Items[2]; it.Entry == nil || string(it.Entry.Value) != `"SECRET-demo"` {
		t.Errorf("demo's own key = %+v", it)
	}
	// A write-only token reads nothing, values and holders included.
	r, _ = batchGet(t, s, "tok-wonly-0123456789abcdef", asked...)
	if r.Status != 200 || strings.Contains(string(r.Body), "SECRET") || strings.Count(string(r.Body), `"forbidden"`) != len(asked) {
		t.Errorf("batch get as a write-only token: %d %s", r.Status, r.Body)
	}
	checkBatchGetRefusals(t, s)
}

// checkBatchGetRefusals: malformed batch gets are 400 naming the field.
func checkBatchGetRefusals(t *testing.T, s *stack) {
	many := make([]string, contract.MaxBatchGetKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf("tenant/acme/project/p/k%d", i)
	}
	manyBody, _ := json.Marshal(contract.BatchGetBody{Keys: many})
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/kv:batchGet", `{"keys":[]}`, "keys"},
		{"/v1/kv:batchGet", `{}`, "keys"},
		{"/v1/kv:batchGet", `{"keys":"tenant/a/project/p/k"}`, "keys"},
		{"/v1/kv:batchGet", `{"keys":["tenant/a/project/p/k","Bad Key"]}`, "keys[1]"},
		{"/v1/kv:batchGet", `{"keys":["tenant/a/project/p/k","tenant/a/project/p/j","tenant/a/project/p/k"]}`, "keys[2]"},
		{"/v1/kv:batchGet", `{"keys":["tenant/a/project/p/k"],"extra":1}`, "extra"},
		{"/v1/kv:batchGet", string(manyBody), "keys"},
		{"/v1/kv:batchGet?x=1", `{"keys":["tenant/a/project/p/k"]}`, "x"},
	} {
		r := s.do("POST", tc.path, devToken, tc.body)
		if r.Status != 400 || r.errorBody(t).Field != tc.field {
			t.Errorf("POST %s %.80s: %d %s, want 400 naming %s", tc.path, tc.body, r.Status, r.Body, tc.field)
		}
	}
	big := `{"keys":["` + strings.Repeat("x", contract.MaxBatchGetBodyBytes) + `"]}`
	if r := s.do("POST", "/v1/kv:batchGet", devToken, big); r.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over %d bytes: %d %.200s, want 413", contract.MaxBatchGetBodyBytes, r.Status, r.Body)
	}
	if r := s.do("POST", "/v1/kv:batchGet", "", `{"keys":["tenant/a/project/p/k"]}`); r.Status != 401 {
		t.Errorf("anonymous batch get: %d %s, want 401", r.Status, r.Body)
	}
}

// TestBatchGetSeesAcknowledgedWrites: a batch get made as soon as writes
// of several partitions were acknowledged answers every one of them, as
// a GET of each would.
func TestBatchGetSeesAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	s := manyKeysStack(t)
	for round := range 20 {
		var keys []string
		for i := range 6 {
			k := fmt.Sprintf("tenant/lin%d/project/p/k", i)
			mustPut(t, s, k, fmt.Sprintf(`{"value":%d}`, round))
			keys = append(keys, k)
		}
		r, a := batchGet(t, s, devToken, keys...)
		for i, it := range a.Items {
			if it.Entry == nil || string(it.Entry.Value) != fmt.Sprint(round) {
				t.Fatalf("round %d: %s = %+v, want the value just written (%d %s)", round, keys[i], it, r.Status, r.Body)
			}
		}
	}
}

// TestProjects: each token lists the projects it may read keys of, with
// the count of those keys; an admin all; anonymous 401; pages by limit.
func TestProjects(t *testing.T) {
	t.Parallel()
	s := manyKeysStack(t)
	for _, k := range []string{"tenant/acme/project/demo/a", "tenant/acme/project/demo/b", "tenant/acme/project/web/a",
		"tenant/globex/project/web/docs/a", "tenant/globex/project/web/docs/b/c", "tenant/globex/project/web/other",
		"tenant/globex/project/web/docs", "tenant/globex/project/web/docsx"} {
		mustPut(t, s, k, `{"value":1}`)
	}
	mustPut(t, s, "tenant/acme/project/gone/a", `{"value":1}`)
	if r := s.do("DELETE", "/v1/kv/tenant/acme/project/gone/a", devToken, nil); r.Status != 200 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	waitProjected(t, s)
	list := func(token, query string) string {
		t.Helper()
		r := s.do("GET", "/v1/projects"+query, token, nil)
		var a contract.ProjectsAnswer
		if r.Status != 200 || json.Unmarshal(r.Body, &a) != nil || a.Count != len(a.Items) {
			t.Fatalf("GET /v1/projects%s: %d %s", query, r.Status, r.Body)
		}
		var parts []string
		for _, p := range a.Items {
			parts = append(parts, fmt.Sprintf("%s/%s=%d", p.Tenant, p.Project, p.Keys))
		}
		if a.Truncated {
			parts = append(parts, "next="+a.NextCursor)
		}
		return strings.Join(parts, " ")
	}
	cur := base64.RawURLEncoding.EncodeToString([]byte("tenant/acme/project/web/"))
	for _, tc := range []struct{ name, token, query, want string }{
		{"Admin", devToken, "", "acme/demo=2 acme/web=1 globex/web=5"},
		{"Tenant", "tok-acme-0123456789abcdef", "", "acme/demo=2 acme/web=1"},
		{"Project", "tok-demo-0123456789abcdef", "", "acme/demo=2"},
		{"BelowAProjectAndAnEmptyProject", "tok-docs-0123456789abcdef", "", "globex/web=3"},
		{"WriteOnly", "tok-wonly-0123456789abcdef", "", ""},
		{"Page", devToken, "?limit=2", "acme/demo=2 acme/web=1 next=" + cur},
		{"NextPage", devToken, "?limit=2&cursor=" + cur, "globex/web=5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := list(tc.token, tc.query); got != tc.want {
				t.Errorf("projects = %q, want %q", got, tc.want)
			}
		})
	}
	if r := s.do("GET", "/v1/projects", "", nil); r.Status != 401 {
		t.Errorf("anonymous: %d %s, want 401", r.Status, r.Body)
	}
	for _, q := range []string{"?limit=0", "?limit=1001", "?cursor=bm9wZQ", "?x=1"} {
		if r := s.do("GET", "/v1/projects"+q, devToken, nil); r.Status != 400 {
			t.Errorf("GET /v1/projects%s: %d %s, want 400", q, r.Status, r.Body)
		}
	}
}

// TestBatchGetForwardsPerPartition: two writers, each owning some
// partitions; a batch get of keys over every partition, through either
// writer, answers each key's latest value: the writer reads its own
// partitions and asks the other for the rest, one request per partition
// owner, and names every partition read.
func TestBatchGetForwardsPerPartition(t *testing.T) {
	t.Parallel()
	ps, _ := manifestWriters(t, func(int, []string) string { return "" })
	keys := make([]string, forwardKeys)
	for i := range forwardKeys {
		keys[i] = forwardKey(i)
		testenv.WaitFor(t, 30*time.Second, "PUT "+keys[i], func() bool {
			code, _ := devCall("PUT", ps.urls[i%2]+"/v1/kv/"+keys[i], fmt.Sprintf(`{"value":%d}`, i))
			return code == http.StatusOK
		})
	}
	body, _ := json.Marshal(contract.BatchGetBody{Keys: append(keys, "tenant/fwd0/project/p/missing")})
	for w, u := range ps.urls {
		code, answer := devCall("POST", u+"/v1/kv:batchGet", string(body))
		var a contract.BatchGetAnswer
		if code != http.StatusOK || json.Unmarshal([]byte(answer), &a) != nil || len(a.Items) != forwardKeys+1 || len(a.Partitions) != partitions {
			t.Fatalf("batch get through writer %d: %d %s; want %d items over %d partitions", w, code, answer, forwardKeys+1, partitions)
		}
		for i, it := range a.Items[:forwardKeys] {
			if it.Entry == nil || string(it.Entry.Value) != fmt.Sprint(i) || it.Partition == nil || *it.Partition != partitionOf(t, keys[i]) {
				t.Errorf("through writer %d, %s = %+v; want value %d in partition %d", w, keys[i], it, i, partitionOf(t, keys[i]))
			}
		}
		if e := a.Items[forwardKeys].Error; e == nil || e.Code != "not_found" || e.Field != fmt.Sprintf("keys[%d]", forwardKeys) {
			t.Errorf("through writer %d, the missing key = %+v", w, a.Items[forwardKeys])
		}
	}
}
