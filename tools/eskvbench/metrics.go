package main

import (
	"bytes"
	"context"
	"io"
	"math"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metrics is one scrape of a service's /metrics: its families by name.
type metrics map[string]*dto.MetricFamily

// parseMetrics reads a Prometheus text exposition.
func parseMetrics(r io.Reader) (metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// scrape returns base/metrics, or nil when base is empty, unreachable or
// does not answer an exposition.
func (b *bench) scrape(ctx context.Context, base string) metrics {
	if base == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return nil
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	m, err := parseMetrics(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	return m
}

// histogram returns the buckets of histogram family name, summed over its
// label sets; found is false when there is no such histogram.
func (m metrics) histogram(name string) (h histogram, found bool) {
	f, ok := m[name]
	if !ok || f.GetType() != dto.MetricType_HISTOGRAM {
		return nil, false
	}
	byLE := map[float64]float64{}
	for _, mt := range f.GetMetric() {
		inf := false
		for _, b := range mt.GetHistogram().GetBucket() {
			byLE[b.GetUpperBound()] += float64(b.GetCumulativeCount())
			inf = inf || math.IsInf(b.GetUpperBound(), 1)
		}
		if !inf {
			byLE[math.Inf(1)] += float64(mt.GetHistogram().GetSampleCount())
		}
	}
	for ub, c := range byLE {
		h = append(h, bucket{UpperBound: ub, Count: c})
	}
	sort.Slice(h, func(i, j int) bool { return h[i].UpperBound < h[j].UpperBound })
	return h, len(h) > 0
}

// histogramNames lists the histogram families, sorted.
func (m metrics) histogramNames() []string {
	var names []string
	for name, f := range m {
		if f.GetType() == dto.MetricType_HISTOGRAM {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// sum sums the samples of a counter, gauge or untyped family (or a
// histogram's name_sum or name_count) over its label sets, keeping only
// those that have each of labels (`outcome="expired"`).
func (m metrics) sum(name string, labels ...string) float64 {
	f, field := m[name], ""
	for _, suffix := range []string{"_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && f == nil {
			f, field = m[base], suffix
		}
	}
	var sum float64
	for _, mt := range f.GetMetric() {
		if hasLabels(mt, labels) {
			sum += value(mt, field)
		}
	}
	return sum
}

func hasLabels(mt *dto.Metric, labels []string) bool {
	for _, l := range labels {
		name, v, _ := strings.Cut(l, "=")
		if labelValue(mt, name) != strings.Trim(v, `"`) {
			return false
		}
	}
	return true
}

func labelValue(mt *dto.Metric, name string) string {
	for _, lp := range mt.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// value is a sample's value; field _sum or _count picks that of a
// histogram or summary.
func value(mt *dto.Metric, field string) float64 {
	switch {
	case mt.Counter != nil:
		return mt.Counter.GetValue()
	case mt.Gauge != nil:
		return mt.Gauge.GetValue()
	case mt.Untyped != nil:
		return mt.Untyped.GetValue()
	case mt.Histogram != nil && field == "_sum":
		return mt.Histogram.GetSampleSum()
	case mt.Histogram != nil && field == "_count":
		return float64(mt.Histogram.GetSampleCount())
	}
	return 0
}

// caughtUp reports whether the auditor's eskv_auditor_next_offset gauges
// reach ends for every non-empty partition.
func caughtUp(m metrics, ends map[string]map[int32]int64) bool {
	next := map[string]map[int32]float64{}
	for _, mt := range m["eskv_auditor_next_offset"].GetMetric() {
		topic := labelValue(mt, "topic")
		p, err := strconv.Atoi(labelValue(mt, "partition"))
		if err != nil {
			continue
		}
		if next[topic] == nil {
			next[topic] = map[int32]float64{}
		}
		next[topic][int32(p)] = value(mt, "")
	}
	for t, ps := range ends {
		for p, o := range ps {
			if o > 0 && next[t][p] < float64(o) {
				return false
			}
		}
	}
	return true
}
