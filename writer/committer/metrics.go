package committer

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the committer's: its rounds and their failures. The
// writer registers them (Collectors) with its own.
type Metrics struct {
	TxnFailures     prometheus.Counter
	Transactions    prometheus.Counter
	RoundPartitions prometheus.Histogram
	GatherSeconds   prometheus.Histogram
	GatherTimeouts  prometheus.Counter
}

// NewMetrics returns the committer's metrics, unregistered.
func NewMetrics() *Metrics {
	return &Metrics{
		TxnFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_transaction_failures_total", Help: "Shared Kafka transactions that failed (their writes answer 503; their partitions resume, or fence and catch up again after a fencing error; the producer is replaced).",
		}),
		Transactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_transactions_total", Help: "Shared Kafka transactions committed (one per round, across partitions).",
		}),
		RoundPartitions: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "eskv_writer_round_partitions", Help: "Partitions per committed shared Kafka transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 8),
		}),
		GatherSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "eskv_writer_round_gather_seconds", Help: "Time a round waited for the partitions the previous round answered (ESKV_ROUND_GATHER).",
			Buckets: prometheus.ExponentialBuckets(0.00001, 2, 12),
		}),
		GatherTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_round_gather_timeouts_total", Help: "Rounds that started without a partition the previous round answered, its gather wait having run out.",
		}),
	}
}

// Collectors lists the metrics, for registration.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.TxnFailures, m.Transactions, m.RoundPartitions, m.GatherSeconds, m.GatherTimeouts}
}
