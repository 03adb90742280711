package service

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// poolMetric is one metric of a pgxpool.Stat.
type poolMetric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*pgxpool.Stat) float64
}

// PoolCollector exports a pgx pool's statistics (pgxpool.Stat) as
// eskv_pgxpool_* metrics labelled pool=name, read at each scrape: a pool
// whose connections are all acquired, or whose acquires wait, explains
// a slow writer or projector that Postgres's own metrics do not.
type PoolCollector struct {
	pool    *pgxpool.Pool
	metrics []poolMetric
}

// NewPoolCollector returns the collector of pool, labelled pool=name.
func NewPoolCollector(pool *pgxpool.Pool, name string) *PoolCollector {
	labels := prometheus.Labels{"pool": name}
	m := func(metric, help string, kind prometheus.ValueType, value func(*pgxpool.Stat) float64) poolMetric {
		return poolMetric{desc: prometheus.NewDesc("eskv_pgxpool_"+metric, help, nil, labels), kind: kind, value: value}
	}
	g, c := prometheus.GaugeValue, prometheus.CounterValue
	return &PoolCollector{pool: pool, metrics: []poolMetric{
		m("acquired_conns", "Connections acquired (in use) now.", g, func(s *pgxpool.Stat) float64 { return float64(s.AcquiredConns()) }),
		m("idle_conns", "Idle connections now.", g, func(s *pgxpool.Stat) float64 { return float64(s.IdleConns()) }),
		m("total_conns", "Connections now: acquired, idle and being opened.", g, func(s *pgxpool.Stat) float64 { return float64(s.TotalConns()) }),
		m("constructing_conns", "Connections being opened now.", g, func(s *pgxpool.Stat) float64 { return float64(s.ConstructingConns()) }),
		m("max_conns", "The pool's maximum size (pool_max_conns).", g, func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }),
		m("acquires_total", "Connections acquired from the pool.", c, func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }),
		m("acquire_seconds_total", "Time spent acquiring connections (rate / rate of acquires_total: mean acquire time).", c,
			func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }),
		m("empty_acquires_total", "Acquires that waited because no connection was idle.", c, func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }),
		m("empty_acquire_wait_seconds_total", "Time acquires waited because no connection was idle.", c,
			func(s *pgxpool.Stat) float64 { return s.EmptyAcquireWaitTime().Seconds() }),
		m("canceled_acquires_total", "Acquires abandoned because their context ended.", c, func(s *pgxpool.Stat) float64 { return float64(s.CanceledAcquireCount()) }),
		m("new_conns_total", "Connections opened.", c, func(s *pgxpool.Stat) float64 { return float64(s.NewConnsCount()) }),
	}}
}

// Describe implements prometheus.Collector.
func (p *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range p.metrics {
		ch <- m.desc
	}
}

// Collect implements prometheus.Collector: one Stat per scrape.
func (p *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := p.pool.Stat()
	for _, m := range p.metrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(s))
	}
}
