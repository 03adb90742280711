package e2e

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	inproc "github.com/eskv/eskv/testenv/stack"
)

// authzKind is a token of the authorization suite and what it may do on
// the keys under tenant/acme/project/demo/.
type authzKind struct {
	name, slug string
	grant      string
	rights     []api.Right
	read       bool
	write      bool
}

var (
	rw         = []api.Right{api.Read, api.Write}
	authzKinds = []authzKind{
		{"Read", "read", "tenant/acme/project/demo/", []api.Right{api.Read}, true, false},
		{"Write", "write", "tenant/acme/project/demo/", []api.Right{api.Write}, false, true},
		{"ReadWrite", "rw", "tenant/acme/project/demo", rw, true, true},
		{"OtherProject", "proj", "tenant/acme/project/other/", rw, false, false},
		{"OtherTenant", "tenant", "tenant/globex/", rw, false, false},
		// Grants that are string prefixes of the keys but not path
		// prefixes: they cover nothing here.
		{"StringPrefixProject", "prefix", "tenant/acme/project/dem", rw, false, false},
		{"StringPrefixTenant", "prefix-tenant", "tenant/ac", rw, false, false},
	}
)

func (k authzKind) token() string { return "tok-" + k.slug + "-0123456789abcdef" }

// authzRequest is one request of the suite, run by every kind against its
// own keys. In path and body, {b} is the kind's key base and {k} its slug.
// The keys: v (an object holding a secret), c (a counter), l (a lock), ld
// (a leadership), all seeded by another principal; l2, n and e start
// absent.
type authzRequest struct {
	name, method, path, body string
	// refused: the request changes nothing whoever sends it (a conflict,
	// another principal's tenure, a lock value forged by a plain write).
	refused bool
}

// perKeyRequests are the reads answered 200 whatever the rights, each
// key (or project) inside them as the caller may read it: a batch get's
// keys forbidden, the projects listing without the project.
var perKeyRequests = map[string]bool{"BatchGet": true, "Projects": true}

var authzRequests = []authzRequest{
	{"GetValue", "GET", "/v1/kv/{b}v", "", false},
	{"GetField", "GET", "/v1/kv/{b}v?field=secret", "", false},
	{"GetCounter", "GET", "/v1/kv/{b}c:counter", "", false},
	{"GetLock", "GET", "/v1/kv/{b}l:lock", "", false},
	{"GetLeader", "GET", "/v1/kv/{b}ld:leader", "", false},
	{"GetLockEntry", "GET", "/v1/kv/{b}l", "", false},
	{"List", "GET", "/v1/kv?prefix={b}", "", false},
	{"Scan", "GET", "/v1/kv?prefix={b}&field=state&op=eq&value=s", "", false},
	{"ListKeysOnly", "GET", "/v1/kv?prefix={b}&keysOnly=true", "", false},
	{"BatchGet", "POST", "/v1/kv:batchGet", `{"keys":["{b}v","{b}c","{b}l","{b}ld","{b}n"]}`, false},
	{"Projects", "GET", "/v1/projects", "", false},
	{"PutVersionConflict", "PUT", "/v1/kv/{b}v", `{"value":{"x":1},"expectedVersion":999999}`, true},
	{"PutReusedRequestID", "PUT", "/v1/kv/{b}v", `{"value":{"x":2},"requestId":"seed-{k}"}`, true},
	{"PutCreateConflict", "PUT", "/v1/kv/{b}v", `{"value":{"x":3},"expectedVersion":0}`, true},
	{"DeleteVersionConflict", "DELETE", "/v1/kv/{b}v?expectedVersion=999999", "", true},
	{"PatchFieldMismatch", "PATCH", "/v1/kv/{b}v", `{"set":{"state":"t"},"if":{"field":"state","equals":"nope"}}`, true},
	{"PatchVersionConflict", "PATCH", "/v1/kv/{b}v", `{"set":{"state":"t"},"expectedVersion":999999}`, true},
	{"PatchWrongType", "PATCH", "/v1/kv/{b}c", `{"set":{"a":1}}`, true},
	{"IncrementWrongType", "POST", "/v1/kv/{b}v:increment", `{"by":1}`, true},
	{"AcquireHeld", "POST", "/v1/kv/{b}l:acquire", `{"holder":"attacker-{k}"}`, true},
	{"ElectHeld", "POST", "/v1/kv/{b}ld:elect", `{"holder":"attacker-{k}"}`, true},
	{"AcquireLockOfValue", "POST", "/v1/kv/{b}v:acquire", `{"holder":"attacker-{k}"}`, true},
	{"PutLockPurpose", "PUT", "/v1/kv/{b}l2", `{"value":{"holder":"squatter","token":9007199254740993},"semantics":{"purpose":"lock"}}`, true},
	{"PutLeaderPurpose", "PUT", "/v1/kv/{b}l2", `{"value":{"holder":"squatter","token":1},"semantics":{"purpose":"leader"}}`, true},
	{"ReenterOthersLock", "POST", "/v1/kv/{b}l:acquire", `{"holder":"SECRET-lock-{k}"}`, true},
	{"ExtendOthersLock", "POST", "/v1/kv/{b}l:extend", `{"holder":"SECRET-lock-{k}","ttlSeconds":900}`, true},
	{"ReleaseOthersLock", "POST", "/v1/kv/{b}l:release", `{"holder":"SECRET-lock-{k}"}`, true},
	{"ElectOthersLeadership", "POST", "/v1/kv/{b}ld:elect", `{"holder":"SECRET-leader-{k}"}`, true},
	{"HeartbeatOthersLeadership", "POST", "/v1/kv/{b}ld:heartbeat", `{"holder":"SECRET-leader-{k}","ttlSeconds":900}`, true},
	{"ResignOthersLeadership", "POST", "/v1/kv/{b}ld:resign", `{"holder":"SECRET-leader-{k}"}`, true},
	{"TouchVersionConflict", "POST", "/v1/kv/{b}v:touch", `{"ttlSeconds":600,"expectedVersion":999999}`, true},
	{"TouchHeldLock", "POST", "/v1/kv/{b}l:touch", `{"ttlSeconds":900}`, true},
	{"TouchLockNamingVersion", "POST", "/v1/kv/{b}l:touch", `{"persist":true,"expectedVersion":3}`, true},
	{"TouchMissing", "POST", "/v1/kv/{b}l2:touch", `{"ttlSeconds":600}`, true},
	{"SessionCreateOverLive", "POST", "/v1/kv/{b}s:session", `{"ttlSeconds":60}`, true},
	{"KeepAliveMissing", "POST", "/v1/kv/{b}l2:keepalive", `{}`, true},
	{"KeepAliveOfLock", "POST", "/v1/kv/{b}l:keepalive", `{}`, true},
	{"PutOverSession", "PUT", "/v1/kv/{b}s", `{"value":{"ttlSeconds":1,"attached":[]}}`, true},
	{"PutAttachedToMissing", "PUT", "/v1/kv/{b}n2", `{"value":1,"session":"{b}s2"}`, true},
	{"SessionCreate", "POST", "/v1/kv/{b}s2:session", `{"ttlSeconds":600}`, false},
	{"SessionKeepAlive", "POST", "/v1/kv/{b}s:keepalive", `{}`, false},
	{"PutAttached", "PUT", "/v1/kv/{b}n2", `{"value":1,"session":"{b}s"}`, false},
	{"AcquireAttached", "POST", "/v1/kv/{b}n3:acquire", `{"holder":"h-{k}","session":"{b}s"}`, false},
	{"SessionRevoke", "POST", "/v1/kv/{b}s:revoke", `{}`, false},
	{"Increment", "POST", "/v1/kv/{b}c:increment", `{"by":1}`, false},
	{"Touch", "POST", "/v1/kv/{b}v:touch", `{"ttlSeconds":600}`, false},
	{"TouchCounterPersist", "POST", "/v1/kv/{b}c:touch", `{"persist":true}`, false},
	{"Patch", "PATCH", "/v1/kv/{b}v", `{"set":{"state":"t"}}`, false},
	{"Put", "PUT", "/v1/kv/{b}v", `{"value":{"replaced":true}}`, false},
	{"AcquireFree", "POST", "/v1/kv/{b}n:acquire", `{"holder":"h-{k}"}`, false},
	{"ElectFree", "POST", "/v1/kv/{b}e:elect", `{"holder":"h-{k}"}`, false},
	{"DeleteCounter", "DELETE", "/v1/kv/{b}c", "", false},
	{"ExpireDue", "POST", "/v1/kv:expireDue", `{"prefix":"{b}"}`, false},
	// Last: it deletes every key of the kind (the held lock and
	// leadership too).
	{"DeleteRange", "POST", "/v1/kv:deleteRange", `{"prefix":"{b}"}`, false},
}

// authzKeys are the keys a kind's requests may touch.
var authzKeys = []string{"v", "c", "l", "ld", "l2", "n", "e", "s", "s2", "n2", "n3"}

// authzMarkers are what a kind's keys hold that only a reader may see:
// the value's secret, the holders and the counter's digits.
func authzMarkers(slug string) []string {
	return []string{"SECRET-value-" + slug, "SECRET-lock-" + slug, "SECRET-leader-" + slug, "98765432"}
}

// TestAuthorizationMatrix: for every endpoint and every kind of token,
// nothing changes unless the token may write the key, and no value or
// holder leaves the server unless it may read it — checked on every
// response body.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	st := inproc.MustRun(t, inproc.Partitions(partitions))
	cfgs := []api.TokenConfig{{Token: "tok-owner-0123456789abcdef", Principal: "owner",
		Grants: []api.Grant{{Prefix: "tenant/", Rights: rw}}}}
	for _, k := range authzKinds {
		cfgs = append(cfgs, api.TokenConfig{Token: k.token(), Principal: "p-" + k.slug, Grants: []api.Grant{{Prefix: k.grant, Rights: k.rights}}})
	}
	tokens, err := api.NewTokens(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := api.New(api.Config{Tokens: tokens}, st.Writer, st.Store, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	s := &stack{tb: t, broker: st.Broker, pg: st.Postgres, store: st.Store, url: hs.URL}
	owner := cfgs[0].Token
	for _, k := range authzKinds {
		seedAuthz(t, s, owner, k.slug)
	}
	waitProjected(t, s)
	for _, k := range authzKinds {
		t.Run(k.name, func(t *testing.T) {
			s.tb = t
			b := "tenant/acme/project/demo/authz-" + k.slug + "/"
			for _, rq := range authzRequests {
				t.Run(rq.name, func(t *testing.T) {
					s.tb = t
					checkAuthz(t, s, owner, k, rq, b)
				})
			}
			// The last request, DeleteRange, left no key to a kind that
			// may write, and every seeded key to another.
			s.tb = t
			left := strings.Count(snapshotAuthz(s, owner, b), `"version"`)
			if (k.write && left != 0) || (!k.write && left < 4) {
				t.Errorf("after the range delete (write %v): %d keys left", k.write, left)
			}
		})
	}
}

// seedAuthz writes a kind's keys as the owner.
func seedAuthz(tb testing.TB, s *stack, owner, slug string) {
	tb.Helper()
	b := "/v1/kv/tenant/acme/project/demo/authz-" + slug + "/"
	for _, w := range []struct{ method, path, body string }{
		{"PUT", b + "v", `{"value":{"secret":"SECRET-value-` + slug + `","state":"s"},"requestId":"seed-` + slug + `"}`},
		{"PUT", b + "c", `{"value":987654321,"semantics":{"purpose":"counter"}}`},
		{"POST", b + "l:acquire", `{"holder":"SECRET-lock-` + slug + `","ttlSeconds":600}`},
		{"POST", b + "ld:elect", `{"holder":"SECRET-leader-` + slug + `","ttlSeconds":600}`},
		{"POST", b + "s:session", `{"ttlSeconds":600}`},
	} {
		if r := s.do(w.method, w.path, owner, w.body); r.Status != 200 {
			tb.Fatalf("seed %s %s: %d %s", w.method, w.path, r.Status, r.Body)
		}
	}
}

// checkAuthz sends rq as kind k against the keys under b and checks the
// answer and what changed.
func checkAuthz(t *testing.T, s *stack, owner string, k authzKind, rq authzRequest, b string) {
	expand := strings.NewReplacer("{b}", b, "{k}", k.slug)
	path, body := expand.Replace(rq.path), expand.Replace(rq.body)
	mayRead, may := k.read, k.read
	if rq.method != "GET" && !perKeyRequests[rq.name] {
		may = k.write
	}
	before := snapshotAuthz(s, owner, b)
	var sent any
	if body != "" {
		sent = body
	}
	r := s.do(rq.method, path, k.token(), sent)
	after := snapshotAuthz(s, owner, b)
	switch {
	case perKeyRequests[rq.name]:
		checkPerKey(t, k, rq, r)
	case !may:
		if r.Status != 403 || r.errorBody(t).Code != "forbidden" {
			t.Errorf("%s %s without the right: %d %s, want 403 forbidden", rq.method, path, r.Status, r.Body)
		}
	case rq.refused && r.Status < 400:
		t.Errorf("%s %s: %d %s, want it refused", rq.method, path, r.Status, r.Body)
	}
	if (!k.write || rq.refused) && before != after {
		t.Errorf("%s %s (%d %s) changed the keys:\nbefore %s\nafter  %s", rq.method, path, r.Status, r.Body, before, after)
	}
	for _, m := range authzMarkers(k.slug) {
		if !mayRead && !strings.Contains(body, m) && strings.Contains(string(r.Body)+headerText(r), m) {
			t.Errorf("%s %s without read: the answer carries %q: %d %s", rq.method, path, m, r.Status, r.Body)
		}
	}
	if mayRead && rq.name == "GetValue" && !strings.Contains(string(r.Body), "SECRET-value-"+k.slug) {
		t.Errorf("a reader does not see the value: %d %s", r.Status, r.Body)
	}
	if mayRead && rq.name == "GetLock" && !strings.Contains(string(r.Body), "SECRET-lock-"+k.slug) {
		t.Errorf("a reader does not see the holder: %d %s", r.Status, r.Body)
	}
}

// checkPerKey checks the answer of one of perKeyRequests: 200, each key
// forbidden (a batch get) or the project absent (the projects listing)
// for a kind that may not read it, and read for one that may.
func checkPerKey(t *testing.T, k authzKind, rq authzRequest, r response) {
	t.Helper()
	body := string(r.Body)
	if r.Status != 200 {
		t.Errorf("%s %s: %d %s, want 200", rq.method, rq.path, r.Status, r.Body)
		return
	}
	forbidden := strings.Count(body, `"code":"forbidden"`)
	demo := strings.Contains(body, `"project":"demo"`)
	switch {
	case rq.name == "BatchGet" && !k.read && (forbidden != 5 || strings.Contains(body, `"entry"`)):
		t.Errorf("batch get without read: %s, want each of 5 keys forbidden, no entry", body)
	case rq.name == "BatchGet" && k.read && (forbidden != 0 || strings.Count(body, `"entry"`) != 4):
		t.Errorf("batch get with read: %s, want 4 entries and n not_found", body)
	case rq.name == "Projects" && demo != k.read:
		t.Errorf("projects (read %v): %s", k.read, body)
	}
}

// headerText is the answer's headers as text, for the marker check.
func headerText(r response) string {
	var sb strings.Builder
	for name, vs := range r.Header {
		sb.WriteString(name + ": " + strings.Join(vs, ",") + "\n")
	}
	return sb.String()
}

// snapshotAuthz is the state of a kind's keys as the owner reads them.
func snapshotAuthz(s *stack, owner, b string) string {
	var sb strings.Builder
	for _, key := range authzKeys {
		r := s.do("GET", "/v1/kv/"+b+key, owner, nil)
		sb.WriteString(key + "=" + string(r.Body) + "\n")
	}
	return sb.String()
}
