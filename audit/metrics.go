package audit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/changelog"
)

// metrics are the auditor's Prometheus metrics.
type metrics struct {
	rows           *prometheus.CounterVec
	batchSize      prometheus.Histogram
	insertDuration prometheus.Histogram
	lag            prometheus.Histogram
	lookups        prometheus.Counter
	chainStarts    prometheus.Counter
	retries        prometheus.Counter
	nextOffset     *prometheus.GaugeVec
	offsetLag      *prometheus.GaugeVec
	conflictRate   *prometheus.GaugeVec
	alert          *prometheus.GaugeVec
	alertsFired    prometheus.Counter

	verifyRuns          *prometheus.CounterVec
	verifyDiscrepancies prometheus.Gauge
	verifyLast          prometheus.Gauge
}

// lagBuckets resolve the ingest lag from a few ms to minutes of catch-up.
var lagBuckets = []float64{
	.001, .002, .005, .01, .02, .03, .05, .075, .1, .15, .2, .3, .5, .75, 1, 1.5, 2, 3, 5, 10, 30, 60, 300, 1800,
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_auditor_rows_total",
			Help: "Rows ClickHouse accepted, by table (audit_events, audit_conflicts); replays included.",
		}, []string{"table"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eskv_auditor_batch_size",
			Help:    "Records per batch (inserted, then committed to the consumer group).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}),
		insertDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eskv_auditor_insert_duration_seconds",
			Help:    "Time to hash and insert one batch into ClickHouse, retries included.",
			Buckets: []float64{.001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30, 60},
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eskv_auditor_lag_seconds",
			Help:    "Time from a record's ts to ClickHouse accepting its row.",
			Buckets: lagBuckets,
		}),
		lookups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_auditor_chain_lookups_total",
			Help: "Previous chain hashes looked up in ClickHouse (not in the auditor's cache).",
		}),
		chainStarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_auditor_chain_starts_total",
			Help: "Rows past version 1 with no previous row: their earlier versions were compacted away before the auditor read them.",
		}),
		retries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_auditor_insert_retries_total",
			Help: "Batch inserts retried because ClickHouse was unavailable.",
		}),
		nextOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eskv_auditor_next_offset",
			Help: "Next offset to audit per topic and partition, as committed to the consumer group.",
		}, []string{"topic", "partition"}),
		offsetLag: changelog.NewLagGauge("eskv_auditor_offset_lag",
			"Records not audited yet per topic and partition: log end offset minus the auditor group's committed offset; "+
				"updated every few seconds even while the auditor is stalled."),
		verifyRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_auditor_verify_runs_total",
			Help: "Periodic verifications of the audit trail (ESKV_VERIFY_INTERVAL), by outcome: ok, discrepancy (the trail does not match kv.changes) or error (could not run).",
		}, []string{"outcome"}),
		verifyDiscrepancies: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_auditor_verify_discrepancies",
			Help: "Discrepancies the last completed periodic verification found (at most 1000 are counted).",
		}),
		verifyLast: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_auditor_verify_last_run_timestamp_seconds",
			Help: "When the last periodic verification completed (unix seconds; 0: never).",
		}),
		conflictRate: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eskv_auditor_conflict_rate",
			Help: "Conflicts / (conflicts + applied writes) over the alert window, per tenant, project and purpose with traffic in it.",
		}, []string{"tenant", "project", "purpose"}),
		alert: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eskv_auditor_conflict_rate_alert",
			Help: "1 while the conflict rate of a tenant, project and purpose is above the threshold in every minute of the alert window.",
		}, []string{"tenant", "project", "purpose"}),
		alertsFired: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_auditor_conflict_rate_alerts_total",
			Help: "Conflict-rate alerts raised.",
		}),
	}
	for _, o := range []string{VerifyOK, VerifyDiscrepancy, VerifyError} {
		m.verifyRuns.WithLabelValues(o) // exported at 0, so alerts need no absent()
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.rows, m.batchSize, m.insertDuration, m.lag, m.lookups, m.chainStarts,
		m.retries, m.nextOffset, m.offsetLag, m.verifyRuns, m.verifyDiscrepancies, m.verifyLast, m.conflictRate, m.alert, m.alertsFired} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
