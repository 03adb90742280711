package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/eskv/eskv/api"
	"github.com/eskv/eskv/contract"
)

// TestVersion: GET /version answers the configured build to any valid
// token, one granted nothing but another tenant's keys included, and 401 to a request without one
// or with a wrong one.
func TestVersion(t *testing.T) {
	build := contract.BuildInfo{Version: "v1.2.3", Revision: "abc123", GoVersion: "go1.26.8"}
	tokens, err := api.NewTokens([]api.TokenConfig{api.DevToken(token), {Token: "narrow-token-0123456789", Principal: "narrow",
		Grants: []api.Grant{{Prefix: "tenant/other/project/p/", Rights: []api.Right{api.Read}}}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := api.New(api.Config{Tokens: tokens, Build: build}, &fakeWriter{}, fakeLister{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, bearer string
		status       int
	}{
		{"OKDevToken", token, http.StatusOK},
		{"OKTokenOfAnotherTenant", "narrow-token-0123456789", http.StatusOK},
		{"UnauthenticatedWithoutToken", "", http.StatusUnauthorized},
		{"UnauthenticatedWrongToken", "wrong-token-0123456789abcdef", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/version", nil)
			if tc.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tc.bearer)
			}
			rec := httptest.NewRecorder()
			s.Handler().ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", rec.Code, tc.status, rec.Body)
			}
			var got contract.BuildInfo
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if (got == build) != (tc.status == http.StatusOK) {
				t.Errorf("answer %s", rec.Body)
			}
		})
	}
}
