package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection/elemkey"
)

// historyPage reads one page of GET path:history?query.
func historyPage(t *testing.T, s *stack, path, token, query string) contract.HistoryAnswer {
	t.Helper()
	r := s.do("GET", path+":history"+query, token, nil)
	if r.Status != 200 {
		t.Fatalf("history %s%s: %d %s", path, query, r.Status, r.Body)
	}
	var a contract.HistoryAnswer
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("decode %s: %v", r.Body, err)
	}
	return a
}

// versionLine is what a test compares of a version: number, kind, op,
// principal, value, requestId.
func versionLine(v contract.HistoryVersion) string {
	return fmt.Sprintf("%d %s %s %s %s %s", v.Version, v.Kind, v.Op, v.Principal, v.Value, v.RequestID)
}

// TestHistory (issue 14 part 1): five versions of a key written by two
// principals, with a delete and a re-create among them, come back oldest
// first with their values (none for the delete) and principals; paging
// with limit 2 walks them exactly once; fromVersion starts later; a key
// never written is 404; a token without read on the key is 403. No wait
// for the projector: the read itself waits until the projection holds
// every acknowledged write (as listings do).
func TestHistory(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	k := base + "history/doc"
	for i, w := range []struct {
		method, token string
		body          any // nil: none
	}{
		{"PUT", acmeToken, `{"value":{"n":1},"requestId":"h-1"}`},
		{"PUT", devToken, `{"value":{"n":2}}`},
		{"DELETE", acmeToken, nil},
		{"PUT", devToken, `{"value":"again","expectedVersion":0}`},
		{"PUT", acmeToken, `{"value":[1,2,3],"requestId":"h-5"}`},
	} {
		if r := s.do(w.method, k, w.token, w.body); r.Status != 200 && r.Status != 204 {
			t.Fatalf("write %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	want := []string{
		"1 put set acme-svc {\"n\":1} h-1",
		"2 put set " + api.DevPrincipal + " {\"n\":2} ",
		"3 delete delete acme-svc  ",
		"4 put create " + api.DevPrincipal + " \"again\" ",
		"5 put set acme-svc [1,2,3] h-5",
	}
	all := historyPage(t, s, k, readerTok, "")
	if all.Key != strings.TrimPrefix(k, "/v1/kv/") || all.Cursor != "" {
		t.Fatalf("answer key %q cursor %q", all.Key, all.Cursor)
	}
	checkVersions(t, "whole history", all.Versions, want)

	var walked []contract.HistoryVersion
	pages := 0
	for cursor := ""; ; pages++ {
		q := "?limit=2"
		if cursor != "" {
			q += "&cursor=" + cursor
		}
		p := historyPage(t, s, k, acmeToken, q)
		if len(p.Versions) > 2 {
			t.Fatalf("page of %d versions with limit 2", len(p.Versions))
		}
		walked = append(walked, p.Versions...)
		if cursor = p.Cursor; cursor == "" {
			break
		}
	}
	if pages != 2 {
		t.Fatalf("%d pages after the first, want 2 (2+2+1)", pages)
	}
	checkVersions(t, "paged with limit 2", walked, want)
	checkVersions(t, "fromVersion=3", historyPage(t, s, k, devToken, "?fromVersion=3").Versions, want[2:])
	checkVersions(t, "fromVersion=4&limit=1", historyPage(t, s, k, devToken, "?fromVersion=4&limit=1").Versions, want[3:4])
	if a := historyPage(t, s, k, devToken, "?fromVersion=9"); len(a.Versions) != 0 || a.Cursor != "" {
		t.Fatalf("fromVersion past the last: %+v", a)
	}

	// A transaction's versions carry its txnId.
	k2 := strings.TrimPrefix(base, "/v1/kv/") + "history/other"
	if r := s.do("POST", "/v1/txn", acmeToken, `{"ops":[{"op":"put","key":"`+all.Key+`","value":6},{"op":"put","key":"`+k2+`","value":1}]}`); r.Status != 200 {
		t.Fatalf("txn: %d %s", r.Status, r.Body)
	}
	a, b := historyPage(t, s, k, readerTok, "?fromVersion=6").Versions, historyPage(t, s, "/v1/kv/"+k2, readerTok, "").Versions
	if len(a) != 1 || len(b) != 1 || a[0].TxnID == "" || a[0].TxnID != b[0].TxnID || string(a[0].Value) != "6" {
		t.Fatalf("versions of a transaction: %+v and %+v, want one each with the same txnId", a, b)
	}

	expect(t, "never written", s.do("GET", base+"history/never:history", readerTok, nil), 404, contract.ENotFound, "key")
	expect(t, "write-only token", s.do("GET", k+":history", writerTok, nil), 403, contract.EForbidden, "key")
	expect(t, "other tenant", s.do("GET", "/v1/kv/tenant/other/project/p/k:history", acmeToken, nil), 403, contract.EForbidden, "key")
	expect(t, "fromVersion 0", s.do("GET", k+":history?fromVersion=0", readerTok, nil), 400, contract.EInvalid, "fromVersion")
}

// checkVersions compares versions with the lines want (versionLine).
func checkVersions(t *testing.T, what string, versions []contract.HistoryVersion, want []string) {
	t.Helper()
	got := make([]string, len(versions))
	for i, v := range versions {
		got[i] = versionLine(v)
		if v.TS.IsZero() {
			t.Fatalf("%s: version %d has no ts", what, v.Version)
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestHistoryCollection: a set's and a list's histories carry their
// element changes (the member, the pushed and popped values).
func TestHistoryCollection(t *testing.T) {
	t.Parallel()
	s := mustStack(t)
	set, list := base+"history/set", base+"history/list"
	for _, w := range [][2]string{
		{set + ":sadd", `{"member":"a"}`}, {set + ":sadd", `{"member":"b"}`}, {set + ":srem", `{"member":"a"}`},
		{list + ":rpush", `{"value":{"job":1}}`}, {list + ":lpop", `{}`},
	} {
		if r := s.do("POST", w[0], acmeToken, w[1]); r.Status != 200 {
			t.Fatalf("%s %s: %d %s", w[0], w[1], r.Status, r.Body)
		}
	}
	var got []string
	for _, k := range []string{set, list} {
		for _, v := range historyPage(t, s, k, readerTok, "").Versions {
			if v.Element == nil || v.Value == nil {
				t.Fatalf("%s version %d: element %v value %s", k, v.Version, v.Element, v.Value)
			}
			got = append(got, fmt.Sprintf("%d %s %s %s %s", v.Version, v.Op, v.Element.Op, v.Element.Member, v.Element.Value))
		}
	}
	want := "1 sadd add a \n2 sadd add b \n3 srem remove a \n1 rpush add " + elemkey.ListPosition(0) + " {\"job\":1}\n2 lpop remove " + elemkey.ListPosition(0) + " {\"job\":1}"
	if strings.Join(got, "\n") != want {
		t.Fatalf("collection histories:\n%s\nwant\n%s", strings.Join(got, "\n"), want)
	}
}
