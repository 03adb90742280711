package watch

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	watches  prometheus.Gauge
	tailers  prometheus.Gauge
	catchUps prometheus.Gauge
	buffered prometheus.GaugeFunc
	refused  *prometheus.CounterVec
	ends     *prometheus.CounterVec
}

// newMetrics returns the hub's metrics; buffered reads its buffered
// bytes.
func newMetrics(reg prometheus.Registerer, buffered func() int64) (*metrics, error) {
	m := &metrics{
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_watches", Help: "Watches (GET /v1/watch) this writer serves.",
		}),
		tailers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_watch_tailers", Help: "Partitions this writer follows for its watches (one Kafka consumer each).",
		}),
		catchUps: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_watch_catchups", Help: "Watches catching up (reading the log themselves) that hold catch-up memory (ESKV_WATCH_MEMORY_BYTES).",
		}),
		buffered: prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "eskv_writer_watch_buffered_bytes", Help: "Bytes of the events the watches' buffers hold for their clients (an event shared by n watches counts n times).",
		}, func() float64 { return float64(buffered()) }),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_writer_watches_refused_total", Help: "Watches refused, by the limit they met: ESKV_MAX_WATCHES (503 too_many_watches), ESKV_MAX_WATCHES_PER_PRINCIPAL or ESKV_WATCH_MEMORY_BYTES (429 too_many_requests).",
		}, []string{"limit"}),
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_writer_watch_ends_total", Help: "Watches the writer ended, by reason (slow_consumer, cursor_expired, partition_unavailable).",
		}, []string{"reason"}),
	}
	for _, l := range []string{limitWatches, limitWatchesPerPrincipal, limitMemory} {
		m.refused.WithLabelValues(l)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.watches, m.tailers, m.catchUps, m.buffered, m.refused, m.ends} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("watch: register metrics: %w", err)
		}
	}
	return m, nil
}
