package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/keystate"
)

// txnPath, batchGetPath and projectsPath are the fuzzed paths that stand
// for /v1/txn, /v1/kv:batchGet and /v1/projects.
const (
	txnPath      = ":txn"
	batchGetPath = ":batchGet"
	projectsPath = ":projects"
)

var (
	fuzzMethods = []string{"GET", "PUT", "POST", "PATCH", "DELETE", "HEAD", "OPTIONS"}
	readerToken = "reader-token-0123456789"
)

// fuzzStates are the keys the fake writer holds while fuzzing: an object,
// a counter, a lock and a string, so reads and writes reach their
// answers, not only their 404s.
func fuzzStates() map[string]keystate.State {
	st := func(k, v, purpose string) keystate.State {
		return keystate.State{Version: 3, Live: true, Entry: contract.Entry{Key: "tenant/acme/project/demo/" + k, Version: 3,
			Value: json.RawMessage(v), Semantics: contract.Semantics{Purpose: purpose}}}
	}
	m := map[string]keystate.State{}
	for _, s := range []keystate.State{st("obj", `{"a":1,"s":"x"}`, "config"), st("n", `41`, "counter"),
		st("l", `{"holder":"h","token":3}`, "lock"), st("s", `"text"`, "other")} {
		m[s.Entry.Key] = s
	}
	return m
}

// FuzzHandlers sends arbitrary methods, key paths, query strings and
// bodies to the HTTP API over the fake writer: no answer is a 5xx or a
// panic, every error is the JSON error body with a code, and a rejected
// request (4xx) never reached the writer, so it changed nothing.
func FuzzHandlers(f *testing.F) {
	const demo = "tenant/acme/project/demo/"
	for _, s := range []struct {
		method      uint8
		path, query string
		body        string
	}{
		{0, demo + "obj", "field=a", ""},
		{0, demo + "n:counter", "", ""},
		{0, demo + "l:lock", "", ""},
		{0, "", "prefix=tenant/acme/project/demo/&limit=2&cursor=dGVuYW50L2FjbWUvcHJvamVjdC9kZW1vL2EA", ""},
		{0, "", "prefix=tenant/acme/project/demo/&field=a&op=eq&value=1", ""},
		{0, "", "prefix=tenant/acme/project/demo/&keysOnly=true&limit=5000", ""},
		{2, batchGetPath, "", `{"keys":["` + demo + `obj","` + demo + `n","tenant/globex/project/x/k","` + demo + `missing"]}`},
		{2, batchGetPath, "", `{"keys":["` + demo + `obj","` + demo + `obj"]}`},
		{0, projectsPath, "limit=2&cursor=dGVuYW50L2FjbWUvcHJvamVjdC9kZW1vLw", ""},
		{1, demo + "obj", "", `{"value":{"a":1},"expectedVersion":3,"semantics":{"purpose":"config","ttlSeconds":5}}`},
		{1, demo + "k", "", `{"value":3,"expectedVersion":999,"expectedVersion":null}`},
		{1, demo + "k", "", `{"VALUE":5}`},
		{1, demo + "secret%2531", "", `{"value":1}`},
		{2, demo + "n:increment", "", `{"by":2,"create":true}`},
		{2, demo + "l:acquire", "", `{"holder":"h","ttlSeconds":30}`},
		{2, demo + "l:release", "", `{"holder":"h"}`},
		{3, demo + "obj", "", `{"set":{"a":{"b":1}},"unset":["s"],"if":{"field":"a","equals":1}}`},
		{4, demo + "obj", "expectedVersion=3&requestId=r", ""},
		{1, demo + "k", "", `1`},
		{2, demo + "n:increment", "", `{"by":1.5,"semantics":"x"}`},
		{2, txnPath, "", `{"requestId":"r","ops":[{"op":"put","key":"` + demo + `k","value":{"a":1},"condition":{"exists":false}},` +
			`{"op":"increment","key":"` + demo + `n","by":2},{"op":"patch","key":"` + demo + `obj","set":{"a":2},"condition":{"field":"a","equals":1}},` +
			`{"op":"check","key":"` + demo + `l","condition":{"field":"token","equals":3}},{"op":"delete","key":"` + demo + `s","condition":{"version":3}}]}`},
		{2, txnPath, "", `{"ops":[{"op":"put","key":"` + demo + `k","value":1},{"op":"put","key":"tenant/acme/project/x/k","value":1}]}`},
		{2, txnPath, "", `{"ops":[1,{"op":"check"}]}`},
		{2, demo + "set:sadd", "", `{"member":"a/b:c?d","ttlSeconds":60,"requestId":"r"}`},
		{2, demo + "s:srem", "", `{"member":"x","expectedVersion":3}`},
		{0, demo + "set:sismember", "member=%E2%9C%93", ""},
		{0, demo + "set:smembers", "limit=2&cursor=YQ", ""},
		{0, demo + "obj:scard", "", ""},
		{2, demo + "list:lpush", "", `{"value":{"a":[1,"x"]},"ttlSeconds":60,"requestId":"r"}`},
		{2, demo + "list:rpop", "", ``},
		{2, demo + "list:ltrim", "", `{"start":-1000,"stop":-1,"expectedVersion":2}`},
		{0, demo + "list:lrange", "start=0&stop=-1", ""},
		{0, demo + "list:llen", "", ""},
	} {
		f.Add(s.method, uint8(0), s.path, s.query, []byte(s.body))
	}
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token),
		{Token: readerToken, Principal: "reader", Grants: []api.Grant{{Prefix: "tenant/acme/", Rights: []api.Right{api.Read}}}}})
	if err != nil {
		f.Fatal(err)
	}
	w := &fakeWriter{states: fuzzStates()}
	s, err := api.New(api.Config{Tokens: tokens, MaxValueBytes: 1024}, w, fakeLister{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		f.Fatal(err)
	}
	h := s.Handler()
	f.Fuzz(func(t *testing.T, method, tok uint8, path, query string, body []byte) {
		target := "/v1/kv/" + path
		switch path {
		case "":
			target = "/v1/kv"
		case txnPath:
			target = "/v1/txn"
		case batchGetPath:
			target = "/v1/kv:batchGet"
		case projectsPath:
			target = "/v1/projects"
		}
		u, err := url.ParseRequestURI(target + "?" + query)
		if err != nil {
			return // net/http answers 400 before any handler
		}
		req := httptest.NewRequest("GET", "/", bytes.NewReader(body))
		req.Method, req.URL, req.RequestURI = fuzzMethods[int(method)%len(fuzzMethods)], u, u.RequestURI()
		req.Header.Set("Content-Type", "application/json")
		switch tok % 3 {
		case 0:
			req.Header.Set("Authorization", "Bearer "+token)
		case 1:
			req.Header.Set("Authorization", "Bearer "+readerToken)
		}
		w.reqs = nil
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, req, rec, len(w.reqs))
	})
}

// checkAnswer asserts what FuzzHandlers promises of one answer.
func checkAnswer(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder, writes int) {
	t.Helper()
	what := req.Method + " " + req.URL.String()
	if rec.Code >= 500 {
		t.Fatalf("%s: %d %s", what, rec.Code, rec.Body)
	}
	if rec.Code < 400 {
		return
	}
	if writes != 0 {
		t.Fatalf("%s: answered %d after asking the writer %d time(s)", what, rec.Code, writes)
	}
	if req.Method == "HEAD" {
		return
	}
	var b contract.ErrorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || b.Error.Code == "" || b.Error.Message == "" {
		t.Fatalf("%s: %d with an error body that is not one: %s", what, rec.Code, rec.Body)
	}
	for _, internal := range []string{"api.", "events.", "writer.", "json:", "reflect", "int64", "float64", "map[", "RawMessage", "postgres"} {
		if strings.Contains(b.Error.Message, internal) {
			t.Fatalf("%s: the message names an internal (%s): %s", what, internal, b.Error.Message)
		}
	}
}
