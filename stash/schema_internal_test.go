package stash

import (
	"errors"
	"testing"

	"github.com/eskv/eskv/contract"
)

// TestR2_1RequiredMembers: each type's value holds the members its
// schema names (R2.1), of their JSON type; a value without one, or with
// one of another type, is ErrInvalidValue and a contract.Error invalid
// naming the member (value.<name>). Other members are free.
func TestR2_1RequiredMembers(t *testing.T) {
	t.Parallel()
	resource := func(drop string) map[string]any {
		return without(map[string]any{"uri": "s3://b/k", "kind": "bucket", "region": "eu"}, drop)
	}
	artifact := func(drop string) map[string]any {
		return without(map[string]any{"path": "out/a.tar", "producer": "crumb-1", "checksum": "sha256:00"}, drop)
	}
	lock := func(drop string) map[string]any {
		return without(map[string]any{"holder": "w-1", "acquired_at": "2026-01-01T00:00:00Z"}, drop)
	}
	for _, tc := range []struct {
		name, typ string
		value     any
		field     string // "" when the value is accepted
	}{
		{"resource accepted", TypeResource, resource(""), ""},
		{"resource without uri refused", TypeResource, resource("uri"), "value.uri"},
		{"resource without kind refused", TypeResource, resource("kind"), "value.kind"},
		{"resource empty object refused", TypeResource, map[string]any{}, "value.uri"},
		{"resource null refused", TypeResource, nil, "value"},
		{"resource uri number refused", TypeResource, map[string]any{"uri": 5, "kind": "bucket"}, "value.uri"},
		{"resource kind null refused", TypeResource, map[string]any{"uri": "u", "kind": nil}, "value.kind"},
		{"artifact accepted", TypeArtifact, artifact(""), ""},
		{"artifact without path refused", TypeArtifact, artifact("path"), "value.path"},
		{"artifact without producer refused", TypeArtifact, artifact("producer"), "value.producer"},
		{"artifact without checksum refused", TypeArtifact, artifact("checksum"), "value.checksum"},
		{"artifact path only refused", TypeArtifact, map[string]any{"path": "out/a.tar"}, "value.producer"},
		{"artifact null refused", TypeArtifact, nil, "value"},
		{"artifact path bool refused", TypeArtifact, map[string]any{"path": true, "producer": "p", "checksum": "c"}, "value.path"},
		{"context accepted", TypeContext, map[string]any{"anything": []any{1, 2}}, ""},
		{"context empty object accepted", TypeContext, map[string]any{}, ""},
		{"context null accepted", TypeContext, nil, ""},
		{"context string refused", TypeContext, "just text", "value"},
		{"counter accepted", TypeCounter, map[string]any{"value": 7}, ""},
		{"counter without value refused", TypeCounter, map[string]any{}, "value.value"},
		{"counter value string refused", TypeCounter, map[string]any{"value": "7"}, "value.value"},
		{"counter value float refused", TypeCounter, map[string]any{"value": 1.5}, "value.value"},
		{"counter array refused", TypeCounter, []any{7}, "value"},
		{"lock null accepted", TypeLock, nil, ""},
		{"lock held accepted", TypeLock, lock(""), ""},
		{"lock without holder refused", TypeLock, lock("holder"), "value.holder"},
		{"lock empty holder refused", TypeLock, map[string]any{"holder": "", "acquired_at": "2026-01-01T00:00:00Z"}, "value.holder"},
		{"lock without acquired_at refused", TypeLock, lock("acquired_at"), "value.acquired_at"},
		{"lock acquired_at number refused", TypeLock, map[string]any{"holder": "w", "acquired_at": 5}, "value.acquired_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := encodeValue(tc.typ, tc.value, false)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *contract.Error
			if !errors.Is(err, ErrInvalidValue) || !errors.As(err, &e) || e.Code != contract.EInvalid || e.Field != tc.field {
				t.Fatalf("want ErrInvalidValue, invalid on %s; got %v", tc.field, err)
			}
		})
	}
}

// without is m less its member drop.
func without(m map[string]any, drop string) map[string]any {
	delete(m, drop)
	return m
}
