package projection_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/testenv"
)

// noBudget is a byte budget no test page reaches.
const noBudget = 1 << 30

// TestPageByteBudget: a page holds no more entries than fit in its byte
// budget, always at least one, and says it is truncated when entries are
// left; listing and filtered scans alike.
func TestPageByteBudget(t *testing.T) {
	t.Parallel()
	s := projection.New(testenv.MustPostgres(t))
	now := t0.Add(24 * time.Hour)
	const p = "tenant/t/project/budget/"
	big := `{"state":"done","pad":"` + strings.Repeat("x", 64<<10) + `"}` // 64 KiB
	var evs []contract.Event
	for i := range 10 {
		evs = append(evs, put(t, fmt.Sprintf("%sk%02d", p, i), 1, big))
	}
	mustApply(t, s, "kv.changes", batchOf(0, evs...))
	list := func(after string, limit, maxBytes int) ([]contract.Entry, bool, error) {
		return s.List(context.Background(), p, projection.Page{After: after, Limit: limit, MaxBytes: maxBytes, Now: now})
	}
	scan := func(after string, limit, maxBytes int) ([]contract.Entry, bool, error) {
		entries, next, err := s.Scan(context.Background(), p, filter("state", contract.FilterEq, `"done"`), projection.Page{After: after, Limit: limit, MaxBytes: maxBytes, Now: now})
		return entries, next != "", err
	}
	for name, page := range map[string]func(string, int, int) ([]contract.Entry, bool, error){"List": list, "Scan": scan} {
		for _, tc := range []struct {
			name      string
			after     string
			limit     int
			maxBytes  int
			want      []string
			truncated bool
		}{
			{"OKBudgetCutsBeforeLimit", "", 100, 200 << 10, []string{"k00", "k01", "k02"}, true},
			{"OKAtLeastOneEntry", "", 100, 1, []string{"k00"}, true},
			{"OKCursorContinues", p + "k02", 100, 200 << 10, []string{"k03", "k04", "k05"}, true},
			{"OKLimitCutsBeforeBudget", "", 2, 200 << 10, []string{"k00", "k01"}, true},
			{"OKLastPageNotTruncated", p + "k06", 100, 200 << 10, []string{"k07", "k08", "k09"}, false},
			{"OKNoBudgetReached", "", 100, noBudget, []string{"k00", "k01", "k02", "k03", "k04", "k05", "k06", "k07", "k08", "k09"}, false},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				entries, truncated, err := page(tc.after, tc.limit, tc.maxBytes)
				if err != nil {
					t.Fatal(err)
				}
				got := []string{}
				for _, e := range entries {
					got = append(got, strings.TrimPrefix(e.Key, p))
					if string(e.Value) != big {
						t.Errorf("%s: value of %d bytes, want the stored %d", e.Key, len(e.Value), len(big))
					}
				}
				if !slices.Equal(got, tc.want) || truncated != tc.truncated {
					t.Errorf("got %v truncated=%v, want %v truncated=%v", got, truncated, tc.want, tc.truncated)
				}
			})
		}
		t.Run(name+"/ErrNonPositiveBudget", func(t *testing.T) {
			_, _, err := page("", 10, 0)
			if contract.ErrorCode(err) != contract.EInvalid {
				t.Errorf("error %v, want code %s", err, contract.EInvalid)
			}
		})
	}
}
