package client_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

// TestDeleteRangeAll: DeleteRangeAll posts chunked range deletes, each
// after the previous answer's nextCursor, until one is not truncated, and
// sums their counts; ExpireDue posts its prefix; an invalid prefix is
// refused before anything is sent.
func TestDeleteRangeAll(t *testing.T) {
	t.Parallel()
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, r.URL.Path+" "+string(b))
		a := contract.PrefixAnswer{Prefix: scope + "p/", Count: 1000, Truncated: true, NextCursor: scope + "p/k0999"}
		if len(bodies) == 2 {
			a = contract.PrefixAnswer{Prefix: scope + "p/", Count: 7}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	defer srv.Close()
	c := client.New(srv.URL, testToken)
	n, err := c.DeleteRangeAll(t.Context(), scope+"p/")
	if err != nil || n != 1007 {
		t.Fatalf("DeleteRangeAll: %d %v, want 1007", n, err)
	}
	want := []string{
		`/v1/kv:deleteRange {"prefix":"` + scope + `p/","chunked":true}`,
		`/v1/kv:deleteRange {"prefix":"` + scope + `p/","chunked":true,"cursor":"` + scope + `p/k0999"}`,
	}
	if len(bodies) != 2 || bodies[0] != want[0] || bodies[1] != want[1] {
		t.Fatalf("sent %q, want %q", bodies, want)
	}
	if _, err := c.ExpireDue(t.Context(), scope+"p/", ""); err != nil || bodies[2] != `/v1/kv:expireDue {"prefix":"`+scope+`p/"}` {
		t.Fatalf("ExpireDue: %v, sent %q", err, bodies[2:])
	}
	if _, err := c.DeleteRange(t.Context(), client.DeleteRangeRequest{Prefix: "tenant/acme/"}); contract.ErrorCode(err) != contract.EInvalid || len(bodies) != 3 {
		t.Fatalf("a prefix spanning projects: %v, sent %q", err, bodies[3:])
	}
}

// TestExpireDueAll: ExpireDueAll posts expireDue calls, each after the
// previous answer's nextCursor, until one is not truncated, and sums
// their counts.
func TestExpireDueAll(t *testing.T) {
	t.Parallel()
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, r.URL.Path+" "+string(b))
		a := contract.PrefixAnswer{Prefix: scope + "p/", Count: 1000, Truncated: true, NextCursor: scope + "p/k0999"}
		if len(bodies) == 2 {
			a = contract.PrefixAnswer{Prefix: scope + "p/", Count: 3}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(a)
	}))
	defer srv.Close()
	n, err := client.New(srv.URL, testToken).ExpireDueAll(t.Context(), scope+"p/")
	want := []string{
		`/v1/kv:expireDue {"prefix":"` + scope + `p/"}`,
		`/v1/kv:expireDue {"prefix":"` + scope + `p/","cursor":"` + scope + `p/k0999"}`,
	}
	if err != nil || n != 1003 || len(bodies) != 2 || bodies[0] != want[0] || bodies[1] != want[1] {
		t.Fatalf("ExpireDueAll: %d %v, sent %q, want 1003 after %q", n, err, bodies, want)
	}
}
