package contract

import (
	"errors"
	"strings"
	"testing"
)

func TestDirectiveOf(t *testing.T) {
	tests := []struct {
		name      string
		principal string
		header    string
		sent      bool
		want      string
		wantErr   bool
	}{
		{"OKFromPrincipal", "harvester:sync-onedrive", "", false, "sync-onedrive", false},
		{"OKHeaderAgreesWithPrincipal", "harvester:sync-onedrive", "sync-onedrive", true, "sync-onedrive", false},
		{"OKServiceAccountHeader", "svc-indexer", "reindex.v2_nightly", true, "reindex.v2_nightly", false},
		{"OKServiceAccountNone", "svc-indexer", "", false, "", false},
		{"OKPrincipalInvalidDirectiveIsAgent", "mail:alice@example.com", "", false, "", false},
		{"OKExactlyMax", "svc", strings.Repeat("d", MaxDirectiveLen), true, strings.Repeat("d", MaxDirectiveLen), false},
		{"ErrHeaderDiffersFromPrincipal", "harvester:sync-onedrive", "other", true, "", true},
		{"ErrEmpty", "svc", "", true, "", true},
		{"ErrTooLong", "svc", strings.Repeat("d", MaxDirectiveLen+1), true, "", true},
		{"ErrSpace", "svc", "two words", true, "", true},
		{"ErrColon", "svc", "a:b", true, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DirectiveOf(tt.principal, tt.header, tt.sent)
			if tt.wantErr {
				var e *Error
				if !errors.As(err, &e) || e.Code != EInvalid || e.Field != DirectiveHeader {
					t.Fatalf("DirectiveOf(%q, %q) error = %v, want invalid naming %s", tt.principal, tt.header, err, DirectiveHeader)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("DirectiveOf(%q, %q) = %q, %v; want %q", tt.principal, tt.header, got, err, tt.want)
			}
		})
	}
}

func TestSplitPrincipal(t *testing.T) {
	for _, tt := range []struct{ name, in, agent, directive string }{
		{"OKAgentAndDirective", "harvester:sync-onedrive", "harvester", "sync-onedrive"},
		{"OKServiceAccount", "svc-indexer", "svc-indexer", ""},
		{"OKFirstColonSplits", "a:b:c", "a:b:c", ""},
		{"OKNoAgent", ":d", ":d", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if a, d := SplitPrincipal(tt.in); a != tt.agent || d != tt.directive {
				t.Errorf("SplitPrincipal(%q) = %q, %q; want %q, %q", tt.in, a, d, tt.agent, tt.directive)
			}
		})
	}
}
