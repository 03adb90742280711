package projector

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/changelog"
)

// metrics are the projector's Prometheus metrics.
type metrics struct {
	applied       prometheus.Counter
	batchSize     prometheus.Histogram
	applyDuration prometheus.Histogram
	lag           prometheus.Histogram
	nextOffset    *prometheus.GaugeVec
	resets        *prometheus.CounterVec
	carried       prometheus.Gauge
	txnIncomplete prometheus.Counter
	offsetLag     *prometheus.GaugeVec

	historyDeleted    prometheus.Counter
	retentionRun      prometheus.Gauge
	retentionDuration prometheus.Gauge
}

// lagBuckets resolve p99 from a millisecond to a few hundred ms finely,
// and still count catch-up after an outage.
var lagBuckets = []float64{
	.0005, .001, .002, .003, .004, .005, .0075, .01, .0125, .015, .02, .025, .03, .04, .05,
	.06, .07, .08, .09, .1, .125, .15, .2, .25, .3, .4, .5, .75, 1, 2.5, 5, 10, 30, 60, 300,
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		applied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_projector_events_applied_total",
			Help: "Events applied to the Postgres projection (replays included).",
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eskv_projector_batch_size",
			Help:    "Events per applied batch (one Postgres transaction).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 14),
		}),
		applyDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eskv_projector_apply_duration_seconds",
			Help:    "Time to apply one batch to Postgres, retries included.",
			Buckets: []float64{.0005, .001, .002, .005, .01, .02, .05, .1, .2, .5, 1, 2, 5, 10, 30},
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "eskv_projector_lag_seconds",
			Help:    "Time from an event's ts to its commit in Postgres.",
			Buckets: lagBuckets,
		}),
		nextOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eskv_projector_next_offset",
			Help: "Next offset to apply per partition, as stored in Postgres by this projector.",
		}, []string{"partition"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_projector_topic_resets_total",
			Help: "Resets of the changes topic detected (the projector stops at each): reason is offset_after_end, " +
				"offset_before_start, topic_recreated, topic_missing, partition_count or offset_out_of_range.",
		}, []string{"reason"}),
		carried: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_projector_carried_records",
			Help: "Records polled but held back after the last batch: the start of a Kafka transaction whose end was not polled yet.",
		}),
		txnIncomplete: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_projector_txn_incomplete_total",
			Help: "eskv transactions (events sharing a txnId) not whole in their Kafka transaction, applied as they are: " +
				"a writer bug, or compaction removed superseded events of an old transaction.",
		}),
		historyDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_projector_history_deleted_total",
			Help: "kv_history rows removed by the history retention (ESKV_HISTORY_RETENTION).",
		}),
		retentionRun: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_projector_history_retention_last_run_timestamp_seconds",
			Help: "When the history retention last completed a run (unix seconds; 0: never).",
		}),
		retentionDuration: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_projector_history_retention_duration_seconds",
			Help: "How long the last completed history retention run took.",
		}),
		offsetLag: changelog.NewLagGauge("eskv_projector_offset_lag",
			"Records of the changes topic not applied yet per partition: log end offset minus the greater of the projector group's committed offset "+
				"and the offset this projector stored in Postgres; updated every few seconds even while the projector is stalled."),
	}
	for _, r := range changelog.Reasons {
		m.resets.WithLabelValues(r) // exported at 0, so alerts need no absent()
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.applied, m.batchSize, m.applyDuration, m.lag, m.nextOffset, m.resets, m.carried, m.txnIncomplete, m.offsetLag,
		m.historyDeleted, m.retentionRun, m.retentionDuration} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
