package servicetest

import (
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/eskv/eskv/internal/service"
)

// bogus is a value no typed flag accepts and a string flag takes as it is.
const bogus = "bogus\x01value"

// Variables checks a command's settings against want, every flag of
// newFlags (a fresh set each call) by the variable ff reads it from
// (none for an argument, which want omits): the variables are the ones
// documented, each sets its flag, and a value a typed flag refuses is an
// error naming the variable and the value. The ESKV_ environment of the
// test is cleared while it runs.
func Variables(t *testing.T, newFlags func() *service.Flags, want map[string]string) {
	t.Helper()
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, service.Prefix+"_") {
			t.Setenv(name, "") // restored at cleanup
			os.Unsetenv(name)
		}
	}
	f := newFlags()
	if err := f.Parse(nil); err != nil {
		t.Fatalf("Parse without variables: %v", err)
	}
	got := f.Variables()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if got[name] != want[name] {
			t.Errorf("-%s: variable %q, want %q", name, got[name], want[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[name]; !ok {
			t.Errorf("-%s: variable %q, not in the documented list", name, got[name])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got)) {
		checkSets(t, newFlags, name, got[name])
	}
}

// checkSets checks that variable sets -name, or is refused with an error
// naming it and its value.
func checkSets(t *testing.T, newFlags func() *service.Flags, name, variable string) {
	t.Helper()
	t.Setenv(variable, bogus)
	defer os.Unsetenv(variable)
	f := newFlags()
	err := f.Parse(nil)
	switch {
	case err != nil:
		if !strings.Contains(err.Error(), `"`+variable+`"`) || !strings.Contains(err.Error(), `invalid value "bogus\x01value"`) {
			t.Errorf("%s=%q: the error %q does not name the variable and the value", variable, bogus, err)
		}
	case f.Lookup(name).Value.String() != bogus:
		t.Errorf("%s=%q: -%s is %q, not set from it", variable, bogus, name, f.Lookup(name).Value)
	}
}
