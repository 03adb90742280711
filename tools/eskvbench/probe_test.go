package main

import (
	"math/rand/v2"
	"testing"
)

// TestWalkCycle: the walk is one cycle through every slot, whatever the
// seed, so the probe's steps never settle into a short loop the caches
// hold.
func TestWalkCycle(t *testing.T) {
	for _, n := range []int{2, 3, 10, 1000} {
		next := walkCycle(n, rand.New(rand.NewPCG(uint64(n), 7)))
		seen := make([]bool, n)
		at := uint32(0)
		for i := range n {
			if seen[at] {
				t.Fatalf("n=%d: slot %d again after %d steps", n, at, i)
			}
			seen[at] = true
			at = next[at]
		}
		if at != 0 {
			t.Fatalf("n=%d: after %d steps at %d, not back at 0", n, n, at)
		}
	}
}

func TestMachineSpeedRatio(t *testing.T) {
	before := machineSpeed{HashNsPerKiB: 800, WalkNs: 100, Samples: 8}
	for _, tc := range []struct {
		name   string
		after  machineSpeed
		before machineSpeed
		want   string
	}{
		{"Slower", machineSpeed{HashNsPerKiB: 1000, WalkNs: 90, Samples: 8}, before, "1.25 (hash), 0.90 (memory)"},
		{"NoSampleAfter", machineSpeed{}, before, "-"},
		{"NoSampleBefore", before, machineSpeed{}, "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.after.ratio(tc.before); got != tc.want {
				t.Errorf("ratio = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{9, 1, 8, 2}, 8}} {
		if got := median(tc.xs); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
		}
	}
}
