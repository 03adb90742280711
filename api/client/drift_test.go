package client

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/events"
)

// TestWireTypesMatchTheServer keeps the client's wire structs in step
// with the server's, without the client importing api (and echo with it).
func TestWireTypesMatchTheServer(t *testing.T) {
	for _, tc := range []struct {
		name           string
		client, server any
		skip           []string // fields the client leaves out on purpose
	}{
		{"PutBody", putBody{}, events.PutBody{}, nil},
		{"ErrorDetail", errorDetail{}, events.ErrorDetail{}, nil},
		{"DeleteAnswer", DeleteResult{}, events.DeleteAnswer{}, nil},
		{"ListAnswer", ListPage{}, events.ListAnswer{}, []string{"count"}},
		{"IncrementBody", incrementBody{}, events.IncrementBody{}, nil},
		{"LockBody", lockBody{}, events.LockBody{}, nil},
		{"LockAnswer", Lock{}, events.LockAnswer{}, nil},
		{"ReleaseAnswer", ReleaseResult{}, events.ReleaseAnswer{}, nil},
		{"PatchBody", patchBody{}, events.PatchBody{}, nil},
		{"FieldCondition", FieldCondition{}, events.FieldCondition{}, nil},
		{"FieldAnswer", Field{}, events.FieldAnswer{}, nil},
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
