package client

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/api"
)

// TestWireTypesMatchTheServer keeps the client's wire structs in step
// with the server's, without the client importing api (and echo with it).
func TestWireTypesMatchTheServer(t *testing.T) {
	for _, tc := range []struct {
		name           string
		client, server any
		skip           []string // fields the client leaves out on purpose
	}{
		{"PutBody", putBody{}, api.PutBody{}, nil},
		{"ErrorDetail", errorDetail{}, api.ErrorDetail{}, nil},
		{"DeleteAnswer", DeleteResult{}, api.DeleteAnswer{}, nil},
		{"ListAnswer", ListPage{}, api.ListAnswer{}, []string{"count"}},
		{"IncrementBody", incrementBody{}, api.IncrementBody{}, nil},
		{"LockBody", lockBody{}, api.LockBody{}, nil},
		{"LockAnswer", Lock{}, api.LockAnswer{}, nil},
		{"ReleaseAnswer", ReleaseResult{}, api.ReleaseAnswer{}, nil},
		{"PatchBody", patchBody{}, api.PatchBody{}, nil},
		{"FieldCondition", FieldCondition{}, api.FieldCondition{}, nil},
		{"FieldAnswer", Field{}, api.FieldAnswer{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := slices.DeleteFunc(jsonFields(tc.server), func(f string) bool { return slices.Contains(tc.skip, f) })
			if got := jsonFields(tc.client); !slices.Equal(got, want) {
				t.Fatalf("client fields %v, server fields %v", got, want)
			}
		})
	}
}

func jsonFields(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
