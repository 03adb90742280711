package stats

import (
	"strings"
	"testing"
	"time"
)

func TestParseStatusKB(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		n, err := ParseStatusKB(strings.NewReader("Name:\twriter\nVmPeak:\t 1000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n"), "VmHWM")
		if err != nil || n != 50<<20 {
			t.Errorf("got %d, %v; want %d", n, err, 50<<20)
		}
	})
	t.Run("ErrMissing", func(t *testing.T) {
		if _, err := ParseStatusKB(strings.NewReader("Name:\twriter\n"), "VmHWM"); err == nil {
			t.Error("want an error")
		}
	})
}

func TestQuantile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		var d []time.Duration
		for _, x := range n {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tt := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"Empty", nil, 0.5, 0},
		{"One", ms(7), 0.99, 7 * time.Millisecond},
		{"MedianOdd", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"MedianEvenIsLowerMiddle", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"P99Of100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"P100IsMax", ms(hundred...), 1, 100 * time.Millisecond},
		{"P0IsMin", ms(hundred...), 0, 1 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Quantile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("Quantile(%v) = %v, want %v", tt.q, got, tt.want)
			}
		})
	}
}
