package watch

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	watches prometheus.Gauge
	tailers prometheus.Gauge
	refused prometheus.Counter
	ends    *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		watches: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_watches", Help: "Watches (GET /v1/watch) this writer serves.",
		}),
		tailers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_watch_tailers", Help: "Partitions this writer follows for its watches (one Kafka consumer each).",
		}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_watches_refused_total", Help: "Watches refused with 503 too_many_watches (ESKV_MAX_WATCHES reached).",
		}),
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_writer_watch_ends_total", Help: "Watches the writer ended, by reason (slow_consumer, cursor_expired, partition_unavailable).",
		}, []string{"reason"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.watches, m.tailers, m.refused, m.ends} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("watch: register metrics: %w", err)
		}
	}
	return m, nil
}
