package writer

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/writer/committer"
	"github.com/eskv/eskv/writer/statecache"
)

// metrics are the writer's: its writes, batches and partitions, and the
// committer's and state caches' it registers with them.
type metrics struct {
	writes *prometheus.CounterVec
	// writesOK is writes' "ok" child, resolved once: it counts nearly
	// every request, and WithLabelValues hashes the label each time.
	writesOK   prometheus.Counter
	batchSize  prometheus.Histogram
	txnSeconds prometheus.Histogram
	// commitSeconds is the part of txnSeconds a batch spent in its
	// round (committer.Commit).
	commitSeconds prometheus.Histogram
	// The committer's rounds (package committer) and the state caches
	// (package statecache).
	rounds            *committer.Metrics
	cache             *statecache.Metrics
	ownershipRestarts prometheus.Counter
	// resumes counts partitions that went on after a failed round
	// without starting their ownership again (partition.resume).
	resumes prometheus.Counter
	// deferred counts writes a batch's byte budget left for the next
	// batch (package batchbytes).
	deferred          prometheus.Counter
	partitionsReady   prometheus.Gauge
	overlaySize       *prometheus.GaugeVec
	overlayFull       prometheus.Counter
	sweepSeconds      prometheus.Histogram
	swept             *prometheus.CounterVec
	deniedAudits      *prometheus.CounterVec
	listWait          prometheus.Histogram
	listWaitTimeouts  prometheus.Counter
	forwardLoops      prometheus.Counter
	loopingPartitions prometheus.Gauge
	// waiters counts the calls parked in a blocking wait (waits.go).
	waiters prometheus.Gauge
	// confirms counts reads confirmed (partition.confirm), by how; the
	// two children resolved once.
	confirms                               *prometheus.CounterVec
	confirmFence, confirmLSO, confirmLease prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		rounds: committer.NewMetrics(), cache: statecache.NewMetrics(),
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_writer_writes_total", Help: "Write requests decided, by outcome (ok, conflict, replayed, or an error code).",
		}, []string{"outcome"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "eskv_writer_batch_size", Help: "Requests decided per partition batch (one batch per partition in a shared Kafka transaction).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11),
		}),
		txnSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "eskv_writer_batch_seconds", Help: "Time to decide and commit one batch.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14),
		}),
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "eskv_writer_batch_commit_seconds", Help: "Time a batch that appends records spends in its shared Kafka transaction's round (waiting for the round, its produce, group fence and commit): the rest of eskv_writer_batch_seconds is reading and deciding.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14),
		}),
		ownershipRestarts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_ownership_restarts_total", Help: "Times a partition was re-fenced and caught up after an error.",
		}),
		resumes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_partition_resumes_total", Help: "Times a partition went on after a failed shared transaction, without fencing and catching up again (the failure was not a fencing one).",
		}),
		deferred: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_batch_deferred_total", Help: "Writes left for the partition's next batch because the batch's records reached the topic's max.message.bytes less headroom.",
		}),
		partitionsReady: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_partitions_ready", Help: "Partitions this writer owns and has caught up.",
		}),
		overlaySize: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "eskv_writer_overlay_entries", Help: "Keys whose latest event the projection does not hold yet.",
		}, []string{"partition"}),
		overlayFull: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_overlay_full_total", Help: "Writes refused with 503 because the overlay reached ESKV_MAX_OVERLAY keys or requestIds of unprojected writes (the projector is down or behind).",
		}),
		sweepSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "eskv_writer_sweep_seconds", Help: "Time of one TTL sweep round of one partition that found expired entries (query, expire events, commits).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_writer_swept_total", Help: "Expired entries the TTL sweeper handled, by outcome (expired: an expire event was appended; requeued: an in-flight queue item past its visibility deadline returned; expired_items: a queue item past its own TTL removed; skipped: a renewal, delete, pop, ack or earlier sweep won).",
		}, []string{"outcome"}),
		deniedAudits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_writer_denied_audits_total", Help: "Denied writes handed to the writer for the audit trail (AuditDenied), by outcome (queued; not_owner: another writer owns the key's partition; dropped: the partition is not ready or its queue is half full).",
		}, []string{"outcome"}),
		listWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "eskv_writer_list_wait_seconds", Help: "Time a listing waited for the projector to apply the writes under its prefix acknowledged before it arrived (0 when none was unprojected).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		listWaitTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_list_wait_timeouts_total", Help: "Listings answered 503 because the projector did not apply the writes under their prefix within ESKV_MAX_LIST_WAIT.",
		}),
		forwardLoops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_writer_forward_loops_total", Help: "Requests answered 503 forward_loop: forwarding them would have come back to this writer (a writer's ESKV_ADVERTISE_URL is wrong).",
		}),
		loopingPartitions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_forward_loop_partitions", Help: "Partitions whose forwarding loops back to this writer; while above 0 /readyz answers 503.",
		}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_writer_waiters", Help: "Pops and lock acquires waiting (wait=) in the queues of the keys they wait on, at this writer.",
		}),
		confirms: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "eskv_writer_read_confirms_total", Help: "Reads confirmed linearizable, by how: lease (within the read lease of an accepted group fence, no wait), fence (the next shared transaction's group fence, no request of its own) or lso (a last-stable-offset request, shared by the reads that arrived meanwhile).",
		}, []string{"by"}),
	}
	m.writesOK = m.writes.WithLabelValues("ok")
	m.confirmFence, m.confirmLSO = m.confirms.WithLabelValues("fence"), m.confirms.WithLabelValues("lso")
	m.confirmLease = m.confirms.WithLabelValues("lease")
	if err := m.register(reg); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers the writer's metrics with reg, its committer's and
// state caches' included.
func (m *metrics) register(reg prometheus.Registerer) error {
	cs := []prometheus.Collector{m.forwardLoops, m.loopingPartitions, m.writes, m.batchSize, m.txnSeconds, m.commitSeconds,
		m.ownershipRestarts, m.resumes, m.deferred, m.partitionsReady, m.overlaySize, m.overlayFull,
		m.sweepSeconds, m.swept, m.deniedAudits, m.listWait, m.listWaitTimeouts, m.confirms, m.waiters}
	cs = append(cs, m.rounds.Collectors()...)
	for _, c := range append(cs, m.cache.Collectors()...) {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
