package main

import (
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eskv/eskv/tools/internal/cli"
)

func TestSummarizeMerges(t *testing.T) {
	s := summarize(latencies{3, 1}, nil, latencies{2, 4})
	if s.N != 4 || s.P50 != 2 || s.P99 != 4 || s.Max != 4 {
		t.Errorf("summarize = %+v", s)
	}
}

const exposition = `# HELP eskv_projector_lag_seconds Time from event to projection.
# TYPE eskv_projector_lag_seconds histogram
eskv_projector_lag_seconds_bucket{partition="0",le="0.005"} 10
eskv_projector_lag_seconds_bucket{partition="0",le="0.01"} 20
eskv_projector_lag_seconds_bucket{partition="0",le="0.1"} 30
eskv_projector_lag_seconds_bucket{partition="0",le="+Inf"} 30
eskv_projector_lag_seconds_sum{partition="0"} 1.5
eskv_projector_lag_seconds_count{partition="0"} 30
eskv_projector_lag_seconds_bucket{le="0.005",partition="1"} 0
eskv_projector_lag_seconds_bucket{le="0.01",partition="1"} 0
eskv_projector_lag_seconds_bucket{le="0.1",partition="1"} 10
eskv_projector_lag_seconds_bucket{le="+Inf",partition="1"} 10
# TYPE eskv_projector_batch_size histogram
eskv_projector_batch_size_bucket{le="1"} 4
eskv_projector_batch_size_bucket{le="+Inf"} 5
# TYPE go_goroutines gauge
go_goroutines 12
`

func mustMetrics(t *testing.T, exposition string) metrics {
	t.Helper()
	m, err := parseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestHistogram(t *testing.T) {
	m := mustMetrics(t, exposition)
	t.Run("SumsLabelSets", func(t *testing.T) {
		h, ok := m.histogram("eskv_projector_lag_seconds")
		if !ok {
			t.Fatal("not found")
		}
		want := histogram{{0.005, 10}, {0.01, 20}, {0.1, 40}, {math.Inf(1), 40}}
		if !slices.Equal(h, want) {
			t.Errorf("got %v, want %v", h, want)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		if _, ok := m.histogram("eskv_projector_lag"); ok {
			t.Error("found; want not found")
		}
	})
	t.Run("ErrBadValue", func(t *testing.T) {
		if _, err := parseMetrics(strings.NewReader(`x_bucket{le="1"} abc`)); err == nil {
			t.Error("want an error")
		}
	})
	t.Run("Names", func(t *testing.T) {
		got := m.histogramNames()
		want := []string{"eskv_projector_batch_size", "eskv_projector_lag_seconds"}
		if !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
}

func TestHistogramQuantile(t *testing.T) {
	before := histogram{{0.01, 100}, {0.1, 100}, {1, 100}, {math.Inf(1), 100}}
	after := histogram{{0.01, 150}, {0.1, 190}, {1, 200}, {math.Inf(1), 200}}
	d := after.delta(before)
	if d.total() != 100 {
		t.Fatalf("total = %v, want 100", d.total())
	}
	for _, tt := range []struct {
		name     string
		h        histogram
		q        float64
		want     float64
		overflow bool
	}{
		{"InFirstBucketFromZero", d, 0.5, 0.01, false},
		{"Interpolated", d, 0.7, 0.01 + 0.09*20/40, false},
		{"P99InLastFiniteBucket", d, 0.99, 0.1 + 0.9*9/10, false},
		{"Overflow", histogram{{0.1, 1}, {math.Inf(1), 10}}, 0.99, 0.1, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, over := tt.h.quantile(tt.q)
			if math.Abs(got-tt.want) > 1e-9 || over != tt.overflow {
				t.Errorf("quantile(%v) = %v, %v; want %v, %v", tt.q, got, over, tt.want, tt.overflow)
			}
		})
	}
	t.Run("EmptyIsNaN", func(t *testing.T) {
		if v, _ := (histogram{}).quantile(0.5); !math.IsNaN(v) {
			t.Errorf("got %v, want NaN", v)
		}
	})
}

func TestParseStatCPU(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		// pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
		got, err := parseStatCPU("42 (my (odd) name) S 1 42 42 0 -1 4194560 100 0 0 0 250 125 0 0 20 0 8 0")
		if err != nil || got != 3.75 {
			t.Errorf("got %v, %v; want 3.75", got, err)
		}
	})
	t.Run("ErrShort", func(t *testing.T) {
		if _, err := parseStatCPU("42 (x) S 1 2"); err == nil {
			t.Error("want an error")
		}
	})
}

func TestParse(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		cli.SetEnv(t, nil)
		c, err := parse(nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if c.n != 2000 || c.clients != 64 || c.duration != 10*time.Second || c.partitions != 12 || c.url != "" {
			t.Errorf("defaults: %+v", c)
		}
	})
	t.Run("Env", func(t *testing.T) {
		cli.SetEnv(t, map[string]string{"ESKV_BENCH_URL": "http://x/", "ESKV_BENCH_TOKEN": "t", "ESKV_BENCH_N": "5"})
		c, err := parse(nil, io.Discard)
		if err != nil || c.url != "http://x" || c.n != 5 {
			t.Errorf("got %+v, %v", c, err)
		}
	})
	t.Run("ErrURLWithoutToken", func(t *testing.T) {
		cli.SetEnv(t, nil)
		if _, err := parse([]string{"-url", "http://x"}, io.Discard); err == nil {
			t.Error("want an error")
		}
	})
	t.Run("ErrPIDWithoutURL", func(t *testing.T) {
		cli.SetEnv(t, nil)
		if _, err := parse([]string{"-writer-pid", "1"}, io.Discard); err == nil {
			t.Error("want an error")
		}
	})
}
