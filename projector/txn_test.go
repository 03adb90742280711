package projector_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
)

// txnProducer commits records in Kafka transactions, like testenv's
// Producer, with client options of its own (small record batches), and
// remembers every last stable offset a commit left, per partition: the
// only offsets a projection may ever store.
type txnProducer struct {
	cl         *kgo.Client
	prod       *testenv.Producer // builds the records
	topic      string
	mu         sync.Mutex
	boundaries map[int32]map[int64]bool
	ends       map[int32]int64 // the last stable offsets after the last commit
}

// boundary reports whether off is 0 or the last stable offset after one
// of the commits in partition part.
func (p *txnProducer) boundary(part int32, off int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return off == 0 || p.boundaries[part][off]
}

func newTxnProducer(tb testing.TB, b *testenv.Broker, prod *testenv.Producer, opts ...kgo.Opt) *txnProducer {
	tb.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(b.Addrs...),
		kgo.TransactionalID(fmt.Sprintf("txn-test-%p", tb)),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	}, opts...)...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cl.Close)
	return &txnProducer{cl: cl, prod: prod, topic: b.Topics.Changes, boundaries: map[int32]map[int64]bool{}, ends: map[int32]int64{}}
}

func (p *txnProducer) commit(tb testing.TB, evs ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cl.BeginTransaction(); err != nil {
		tb.Fatal(err)
	}
	if err := p.cl.ProduceSync(ctx, p.prod.Records(tb, evs...)...).FirstErr(); err != nil {
		tb.Fatal(err)
	}
	if err := p.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		tb.Fatal(err)
	}
	ends := testenv.EndOffsets(ctx, tb, p.cl, p.topic)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ends = ends
	for part, o := range ends {
		if p.boundaries[part] == nil {
			p.boundaries[part] = map[int64]bool{}
		}
		p.boundaries[part][o] = true
	}
}

// eskvTxn returns the events of one eskv transaction: version v of each
// of keys.
func eskvTxn(id string, keys []string, v int64) []any {
	evs := make([]any, len(keys))
	for i, k := range keys {
		e := newEvent(k, v, contract.KindPut, fmt.Sprintf(`{"v":%d,"pad":"%0200d"}`, v, 0))
		e.TxnID, e.TxnSize = id, len(keys)
		if v > 1 {
			e.Op = contract.OpCAS
		}
		evs[i] = e
	}
	return evs
}

// TestTransactionsAppliedWhole produces eskv transactions of 40 keys
// between small writes while polls (MaxBatch) or fetches (byte limits)
// hold far fewer records, so that polls end inside Kafka transactions. A
// reader polling the projection all along must only ever see the 40 keys
// at one version and the stored offsets on a transaction boundary, and
// each transaction's history rows must come from one Postgres transaction.
func TestTransactionsAppliedWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cfg    projector.Config
		client []kgo.Opt
		// joiner starts a second projector in the group once the first
		// applied half the transactions, then produces the other half:
		// partitions move while tails may be held.
		joiner bool
	}{
		{"PollsOfSevenRecords", projector.Config{MaxBatch: 7}, nil, false},
		{"FetchesOfTwoKilobytes", projector.Config{Opts: []kgo.Opt{kgo.FetchMaxBytes(2048), kgo.FetchMaxPartitionBytes(2048)}},
			[]kgo.Opt{kgo.ProducerBatchMaxBytes(1024)}, false},
		{"PollsOfSevenRecordsAndARebalance", projector.Config{MaxBatch: 7}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, pg, s, prod := mustSetup(t, 2)
			p := newTxnProducer(t, b, prod, tc.client...)
			const rounds, size = 8, 40
			var keys []string
			for i := range size {
				keys = append(keys, fmt.Sprintf("tenant/t0/project/p/big%02d", i))
			}
			f := newFold(7, 2, 5)
			produceRounds := func(from, to int64) {
				for r := from; r < to; r++ {
					p.commit(t, f.next(), f.next(), f.next())
					p.commit(t, f.remember(eskvTxn(fmt.Sprintf("txn-%d", r+1), keys, r+1))...)
				}
			}
			half := int64(rounds)
			if tc.joiner {
				half /= 2
			}
			produceRounds(0, half)

			stop := make(chan struct{})
			var wg sync.WaitGroup
			var seen observations
			wg.Go(func() { seen = observe(pg.Pool, b.Topics.Changes, stop) })
			r := start(t, b, s, tc.cfg)
			if tc.joiner {
				testenv.WaitFor(t, runTimeout, "the first projector to apply half", func() bool {
					return counter(t, r.reg, "eskv_projector_events_applied_total") >= float64(half*(size+3))
				})
				start(t, b, s, tc.cfg)
				produceRounds(half, rounds)
			}
			p.commit(t, f.next())
			testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, p.ends)
			close(stop)
			wg.Wait()
			for po := range seen.offsets {
				if !p.boundary(int32(po[0]), po[1]) {
					seen.violations = append(seen.violations, fmt.Sprintf("stored offset %d of partition %d is inside a transaction", po[1], po[0]))
				}
			}
			for _, v := range seen.violations {
				t.Error(v)
			}
			t.Logf("reader: %d snapshots, versions seen %v", seen.reads, seen.versions)

			var txns, split, batches int
			err := pg.Pool.QueryRow(context.Background(), `
				WITH h AS (SELECT coalesce(event, event_text::jsonb) AS event, xmin FROM kv_history)
				SELECT (SELECT count(DISTINCT event->>'txnId') FROM h WHERE event ? 'txnId'),
				       (SELECT count(*) FROM (SELECT event->>'txnId' FROM h WHERE event ? 'txnId'
				                              GROUP BY 1 HAVING count(DISTINCT xmin::text) > 1) s),
				       (SELECT count(DISTINCT xmin::text) FROM h)`).Scan(&txns, &split, &batches)
			if err != nil {
				t.Fatal(err)
			}
			if txns != rounds || split != 0 {
				t.Errorf("%d transactions projected, %d of them over several Postgres transactions; want %d, 0", txns, split, rounds)
			}
			if batches < rounds {
				t.Errorf("the projector applied %d Postgres transactions; want at least %d (polls and fetches must split Kafka transactions, or the test proves nothing)", batches, rounds)
			}
			if n := counter(t, r.reg, "eskv_projector_txn_incomplete_total"); n != 0 {
				t.Errorf("txn_incomplete_total = %v, want 0", n)
			}
			assertFold(t, pg.Pool, s, f)
		})
	}
}

// remember records evs, events produced besides f's, as their keys' last
// events, for assertFold, and returns them.
func (f *fold) remember(evs []any) []any {
	for _, e := range evs {
		ev := e.(contract.Event)
		f.last[ev.Key] = ev
	}
	return evs
}

type observations struct {
	reads      int
	versions   map[int64]bool
	offsets    map[[2]int64]bool // partition, stored offset
	violations []string
}

// observe reads, until stop, in one snapshot at a time, the stored
// offsets and the versions of the transactions' keys (prefix big): every
// key must be at the same version. The offsets seen are kept, to be
// checked against the transaction boundaries once everything is produced
// (a boundary is known only after its commit returned to the producer,
// which may be after the projector applied it).
func observe(pool *pgxpool.Pool, topic string, stop <-chan struct{}) observations {
	o := observations{versions: map[int64]bool{}, offsets: map[[2]int64]bool{}}
	ctx := context.Background()
	for {
		select {
		case <-stop:
			return o
		default:
		}
		err := pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT partition, next_offset FROM projector_offsets WHERE topic = $1`, topic)
			if err != nil {
				return err
			}
			offs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([2]int64, error) {
				var p int32
				var off int64
				err := r.Scan(&p, &off)
				return [2]int64{int64(p), off}, err
			})
			if err != nil {
				return err
			}
			for _, po := range offs {
				o.offsets[po] = true
			}
			var n, lo, hi int64
			if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(min(version), 0), coalesce(max(version), 0)
				FROM kv_entries WHERE key LIKE 'tenant/t0/project/p/big%'`).Scan(&n, &lo, &hi); err != nil {
				return err
			}
			if (n != 0 && n != 40) || lo != hi {
				o.violations = append(o.violations, fmt.Sprintf("a reader saw %d keys of a transaction at versions %d..%d", n, lo, hi))
			}
			o.versions[hi] = true
			return nil
		})
		if err != nil {
			o.violations = append(o.violations, fmt.Sprintf("read: %v", err))
			return o
		}
		o.reads++
	}
}

// TestSplitTransactionCountedNotStalled: an eskv transaction whose events
// a (buggy) writer spread over two Kafka transactions is counted and
// logged, and applied: the projector never stalls on it.
func TestSplitTransactionCountedNotStalled(t *testing.T) {
	t.Parallel()
	b, pg, s, prod := mustSetup(t, 1)
	keys := []string{"tenant/t/project/p/a", "tenant/t/project/p/b", "tenant/t/project/p/c"}
	f := &fold{last: map[string]contract.Event{}}
	evs := eskvTxn("split", keys, 1)
	prod.Commit(t, evs[:2]...)
	prod.Commit(t, evs[2:]...)
	prod.Commit(t, f.remember(eskvTxn("whole", keys, 2))...)

	r := start(t, b, s, projector.Config{})
	testenv.WaitProjected(t, runTimeout, s, b.Topics.Changes, prod.Committed(t))
	if n := counter(t, r.reg, "eskv_projector_txn_incomplete_total"); n != 2 {
		t.Errorf("txn_incomplete_total = %v, want 2 (both parts of the split transaction)", n)
	}
	assertFold(t, pg.Pool, s, f)
}
