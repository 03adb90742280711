package admission_test

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/eskv/eskv/internal/admission"
)

var limit = admission.Limit{Total: 10, Each: 4, TotalSetting: "ESKV_MAX_THINGS", EachSetting: "ESKV_MAX_THINGS_PER_PRINCIPAL"}

// TestGate: a holder takes up to its share, then is refused while others
// still take theirs; the total stops them all; an amount above the share
// is refused as never fitting; releasing makes room again.
func TestGate(t *testing.T) {
	reg := prometheus.NewRegistry()
	refusals, err := admission.Refusals(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := admission.New(limit, refusals)
	a, b, c := admission.Holder{Name: "a"}, admission.Holder{Name: "b"}, admission.Holder{Name: "127.0.0.1", Addr: true}
	steps := []struct {
		name string
		h    admission.Holder
		n    int64
		want *admission.Refused
	}{
		{"OKWithinShare", a, 4, nil},
		{"ErrShareFull", a, 1, &admission.Refused{Setting: limit.EachSetting}},
		{"OKAnotherHolder", b, 4, nil},
		{"OKAddressIsItsOwnHolder", c, 2, nil},
		{"ErrTotalFull", c, 1, &admission.Refused{Setting: limit.TotalSetting}},
		{"ErrNeverFits", admission.Holder{Name: "d"}, 5, &admission.Refused{Setting: limit.EachSetting, Never: true}},
	}
	for _, s := range steps {
		err := g.Take(s.h, s.n)
		var r *admission.Refused
		if errors.As(err, &r) != (s.want != nil) || s.want != nil && *r != *s.want {
			t.Fatalf("%s: Take(%v, %d) = %v, want %+v", s.name, s.h, s.n, err, s.want)
		}
	}
	if g.Used() != 10 || g.Held(a) != 4 {
		t.Fatalf("used %d, a holds %d; want 10 and 4", g.Used(), g.Held(a))
	}
	g.Release(a, 4)
	if err := g.Take(c, 1); err != nil || g.Held(a) != 0 {
		t.Fatalf("after a released: %v, a holds %d", err, g.Held(a))
	}
	if got := testutil.ToFloat64(refusals.WithLabelValues("max_things_per_principal")); got != 2 {
		t.Errorf("refusals by share: %v, want 2", got)
	}
	if got := testutil.ToFloat64(refusals.WithLabelValues("max_things")); got != 1 {
		t.Errorf("refusals by total: %v, want 1", got)
	}
	again, err := admission.Refusals(reg)
	if err != nil || again != refusals {
		t.Fatalf("second Refusals on one registry: %v, %v; want the same counter", again, err)
	}
}
