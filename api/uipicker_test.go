package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/decide"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// pickerMarker is in every plain value the picker tests store: no answer
// of the status page may carry it.
const pickerMarker = "picker-secret-marker"

// pickerAcme is the token of a principal that may read tenant acme only.
const pickerAcme = "picker-acme-token-0123456789"

// pickerServer is a status page over a real projection holding projects
// acme/a (a lock held by worker-7 and four plain keys), acme/b (one key)
// and other/c (one key), every plain value carrying pickerMarker.
func pickerServer(t *testing.T) http.Handler {
	t.Helper()
	store := projection.New(testenv.MustPostgres(t))
	lock, err := json.Marshal(decide.LockValue{Holder: "worker-7", Token: 1, Principal: "acme-svc"})
	if err != nil {
		t.Fatal(err)
	}
	plain := json.RawMessage(`{"secret":"` + pickerMarker + `"}`)
	var batch []projection.Applied
	add := func(key, purpose string, value json.RawMessage) {
		k, err := contract.ParseKey(key)
		if err != nil {
			t.Fatal(err)
		}
		ts := time.Now().Add(-time.Minute)
		e := contract.Event{SchemaVersion: contract.SchemaVersion, Key: key, Scope: k.Scope(), Version: 1, Kind: contract.KindPut, Op: contract.OpSet,
			After: value, CreatedAt: ts, TS: ts, Semantics: contract.Semantics{Purpose: purpose, Producer: "test"},
			RequestID: fmt.Sprintf("req-%d", len(batch)), Principal: "acme-svc", WriterEpoch: 1}
		batch = append(batch, projection.Applied{Partition: 0, Offset: int64(len(batch)), Event: e})
	}
	add("tenant/acme/project/a/jobs/lock", contract.PurposeLock, lock)
	for i := range 4 {
		add(fmt.Sprintf("tenant/acme/project/a/k%d", i), "checkpoint", plain)
	}
	add("tenant/acme/project/b/x", "config", plain)
	add("tenant/other/project/c/y", "config", plain)
	if err := store.Apply(t.Context(), "kv.changes", batch); err != nil {
		t.Fatal(err)
	}
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token),
		{Token: pickerAcme, Principal: "acme-reader", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens}, &fakeWriter{}, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler()
}

// pickerLogin logs tok in and returns the session cookie.
func pickerLogin(t *testing.T, h http.Handler, tok string) *http.Cookie {
	t.Helper()
	req := httptest.NewRequest("POST", "/ui/login", strings.NewReader(url.Values{"token": {tok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if cs := rec.Result().Cookies(); rec.Code != http.StatusSeeOther || len(cs) != 1 {
		t.Fatalf("login: %d with %d cookies, want 303 and the session", rec.Code, len(cs))
	}
	return rec.Result().Cookies()[0]
}

// pickerGet gets path with ck, expects status, checks the answer holds
// no value, and decodes it into out (when not nil).
func pickerGet(t *testing.T, h http.Handler, path string, ck *http.Cookie, status int, out any) {
	t.Helper()
	rec := uiClient{t}.do(h, "GET", path, ck)
	if rec.Code != status {
		t.Fatalf("GET %s: %d %s, want %d", path, rec.Code, rec.Body, status)
	}
	if strings.Contains(rec.Body.String(), pickerMarker) {
		t.Fatalf("GET %s carries a value: %s", path, rec.Body)
	}
	if out != nil {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("GET %s: %v in %s", path, err, rec.Body)
		}
	}
}

// projectNames pages through /ui/api/projects by limit and returns
// "tenant/project=keys" of every project, and how many pages it took.
func projectNames(t *testing.T, h http.Handler, ck *http.Cookie, limit int) ([]string, int) {
	t.Helper()
	var names []string
	cursor, pages := "", 0
	for {
		var a contract.ProjectsAnswer
		pickerGet(t, h, fmt.Sprintf("/ui/api/projects?limit=%d&cursor=%s", limit, cursor), ck, http.StatusOK, &a)
		pages++
		for _, p := range a.Items {
			names = append(names, fmt.Sprintf("%s/%s=%d", p.Tenant, p.Project, p.Keys))
		}
		if a.Count != len(a.Items) || a.Truncated != (a.NextCursor != "") || pages > 10 {
			t.Fatalf("page %d: %+v", pages, a)
		}
		if !a.Truncated {
			return names, pages
		}
		cursor = a.NextCursor
	}
}

// TestUIProjectsPicker: /ui/api/projects answers a session the projects
// its principal may read with their key counts, paged (a tenant's token
// sees its tenant's only, an admin's every one); anyone else gets 401,
// a bearer token included (the data answer sessions only). No answer
// carries a value.
func TestUIProjectsPicker(t *testing.T) {
	h := pickerServer(t)
	acme, admin := pickerLogin(t, h, pickerAcme), pickerLogin(t, h, token)
	if got, pages := projectNames(t, h, acme, 100); !slices.Equal(got, []string{"acme/a=5", "acme/b=1"}) || pages != 1 {
		t.Fatalf("acme's projects: %v in %d pages, want acme/a=5 acme/b=1 in 1", got, pages)
	}
	if got, pages := projectNames(t, h, acme, 1); !slices.Equal(got, []string{"acme/a=5", "acme/b=1"}) || pages != 2 {
		t.Fatalf("acme's projects by 1: %v in %d pages, want acme/a=5 acme/b=1 in 2", got, pages)
	}
	if got, pages := projectNames(t, h, admin, 2); !slices.Equal(got, []string{"acme/a=5", "acme/b=1", "other/c=1"}) || pages != 2 {
		t.Fatalf("the admin's projects by 2: %v in %d pages, want 3 projects in 2", got, pages)
	}
	pickerGet(t, h, "/ui/api/projects", nil, http.StatusUnauthorized, nil)
	req := httptest.NewRequest("GET", "/ui/api/projects", nil)
	req.Header.Set("Authorization", "Bearer "+pickerAcme)
	rec := httptest.NewRecorder()
	if h.ServeHTTP(rec, req); rec.Code != http.StatusUnauthorized {
		t.Fatalf("GET /ui/api/projects with a bearer token and no session: %d, want 401", rec.Code)
	}
	pickerGet(t, h, "/ui/api/projects?limit=0", acme, http.StatusBadRequest, nil)
	pickerGet(t, h, "/ui/api/projects?cursor=bad", acme, http.StatusBadRequest, nil)
	pickerGet(t, h, "/ui/api/projects?prefix=tenant/", acme, http.StatusBadRequest, nil)
}

// TestUIKeysPaged: /ui/api/keys pages the rows by limit and nextCursor
// (every key once, in order), narrows to a search prefix, and answers of
// each value only what uiRow makes public: that the lock is held, by
// which principal, with its fencing token (never the holder's label),
// to a principal that may read it, a plain value's fingerprint (16 hex
// digits, equal for equal values); never a value. A prefix the principal
// may not read whole is 403.
func TestUIKeysPaged(t *testing.T) {
	h := pickerServer(t)
	acme := pickerLogin(t, h, pickerAcme)
	const p = "tenant/acme/project/a/"
	var keys, fingerprints []string
	cursor, pages := "", 0
	for {
		var a api.UIKeys
		pickerGet(t, h, "/ui/api/keys?prefix="+p+"&limit=2&cursor="+cursor, acme, http.StatusOK, &a)
		pages++
		for _, k := range a.Keys {
			keys = append(keys, strings.TrimPrefix(k.Key, p)+":"+k.Purpose)
			if k.Purpose == "checkpoint" {
				fingerprints = append(fingerprints, k.Fingerprint)
			}
		}
		if !a.Truncated || pages > 5 {
			break
		}
		cursor = a.NextCursor
	}
	want := []string{"jobs/lock:lock", "k0:checkpoint", "k1:checkpoint", "k2:checkpoint", "k3:checkpoint"}
	if !slices.Equal(keys, want) || pages != 3 {
		t.Fatalf("keys by 2: %v in %d pages, want %v in 3", keys, pages, want)
	}
	if len(fingerprints) != 4 || !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(fingerprints[0]) || len(slices.Compact(slices.Clone(fingerprints))) != 1 {
		t.Fatalf("the fingerprints of four equal values: %v, want one 16 hex digits four times", fingerprints)
	}
	var a api.UIKeys
	pickerGet(t, h, "/ui/api/keys?prefix="+p+"jobs/", acme, http.StatusOK, &a)
	if len(a.Keys) != 1 || a.Keys[0].Key != p+"jobs/lock" || a.Keys[0].Version != 1 || a.Truncated || a.NextCursor != "" {
		t.Fatalf("search jobs/: %+v, want the lock alone", a)
	}
	if k := a.Keys[0]; !k.Held || k.HolderPrincipal != "acme-svc" || k.Token != 1 || k.LastWriter == "" || k.UpdatedAt.IsZero() || k.Fingerprint != "" || k.Size != nil {
		t.Fatalf("the lock's row: %+v, want held by acme-svc #1, its writer and time, no fingerprint or size", k)
	}
	if rec := (uiClient{t}).do(h, "GET", "/ui/api/keys?prefix="+p+"jobs/", acme); strings.Contains(rec.Body.String(), "worker-7") {
		t.Fatalf("the lock's row names its holder's label: %s", rec.Body)
	}
	pickerGet(t, h, "/ui/api/keys?prefix=tenant/other/project/c/", acme, http.StatusForbidden, nil)
	pickerGet(t, h, "/ui/api/keys?prefix="+p+"&cursor=bad", acme, http.StatusBadRequest, nil)
	pickerGet(t, h, "/ui/api/keys?prefix="+p+"&limit=1001", acme, http.StatusBadRequest, nil)
	pickerGet(t, h, "/ui/api/keys?prefix="+p, nil, http.StatusUnauthorized, nil)
}
