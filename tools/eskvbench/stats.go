package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eskv/eskv/tools/internal/stats"
)

// latencies is a recorder owned by one goroutine; merge them at the end.
// A sorted slice is exact and cheap enough for the sample counts here
// (tens of thousands).
type latencies []time.Duration

// summary is what a scenario reports.
type summary struct {
	N   int
	P50 time.Duration
	P99 time.Duration
	Max time.Duration
}

func summarize(ls ...latencies) summary {
	n := 0
	for _, l := range ls {
		n += len(l)
	}
	all := make([]time.Duration, 0, n)
	for _, l := range ls {
		all = append(all, l...)
	}
	slices.Sort(all)
	if len(all) == 0 {
		return summary{}
	}
	return summary{N: len(all), P50: stats.Quantile(all, 0.50), P99: stats.Quantile(all, 0.99), Max: all[len(all)-1]}
}

// bucket is one cumulative histogram bucket: Count observations were at or
// below UpperBound (+Inf for the last).
type bucket struct {
	UpperBound float64
	Count      float64
}

// histogram is a Prometheus histogram summed over its label sets.
type histogram []bucket

// delta returns after minus before, bucket by bucket (the observations made
// between two scrapes). Buckets missing from before count as zero.
func (after histogram) delta(before histogram) histogram {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.UpperBound] = b.Count
	}
	d := make(histogram, len(after))
	for i, b := range after {
		d[i] = bucket{UpperBound: b.UpperBound, Count: b.Count - prev[b.UpperBound]}
	}
	return d
}

// total is the observation count (the +Inf bucket).
func (h histogram) total() float64 {
	if len(h) == 0 {
		return 0
	}
	return h[len(h)-1].Count
}

// quantile estimates the q-quantile the way PromQL's histogram_quantile
// does: linear interpolation inside the bucket that holds the rank, with
// the first bucket starting at 0. When the rank falls in the +Inf bucket it
// returns the highest finite bound and overflow = true (the value is a
// lower bound). With no observations it returns NaN.
func (h histogram) quantile(q float64) (v float64, overflow bool) {
	n := h.total()
	if n <= 0 {
		return math.NaN(), false
	}
	rank := q * n
	lower, below := 0.0, 0.0
	for _, b := range h {
		if b.Count >= rank {
			if math.IsInf(b.UpperBound, 1) {
				return lower, true
			}
			in := b.Count - below
			if in <= 0 {
				return b.UpperBound, false
			}
			return lower + (b.UpperBound-lower)*(rank-below)/in, false
		}
		lower, below = b.UpperBound, b.Count
	}
	return lower, true
}

// peakRSS returns VmHWM (peak resident set size) of process pid in bytes.
func peakRSS(pid int) (int64, error) { return stats.StatusBytes(pid, "VmHWM") }

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuSeconds returns the user + system CPU time process pid has used.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) of a
// /proc/<pid>/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted after its last ')'.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat: no command name in %q", truncate(stat, 80))
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("stat: %d fields after the command name", len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("stat: %w", err)
	}
	return float64(utime+stime) / clockTicks, nil
}
