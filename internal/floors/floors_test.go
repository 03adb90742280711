package floors

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/testenv"
)

// BenchmarkKfakeTxn commits transactions of n records each to one
// partition of an in-process kfake with a data directory, as the
// devbroker runs: the broker's floor in committed transactions/s and
// records/s.
func BenchmarkKfakeTxn(b *testing.B) {
	for _, n := range []int{1, 10, 100, 500} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			cl := txnProducer(b)
			ctx := context.Background()
			value := make([]byte, 200) // about an eskv event's size
			b.ResetTimer()
			for range b.N {
				commitOne(ctx, b, cl, n, value)
			}
			b.StopTimer()
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/secs, "txn/s")
			b.ReportMetric(float64(b.N*n)/secs, "records/s")
		})
	}
}

// txnProducer starts kfake with a data directory and returns a
// transactional producer on it.
func txnProducer(b *testing.B) *kgo.Client {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.DataDir(b.TempDir()), kfake.SeedTopics(1, "floor"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("floor-"+strconv.Itoa(b.N)),
		kgo.DefaultProduceTopic("floor"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// commitOne produces n records in one transaction and commits it.
func commitOne(ctx context.Context, b *testing.B, cl *kgo.Client, n int, value []byte) {
	if err := cl.BeginTransaction(); err != nil {
		b.Fatal(err)
	}
	for range n {
		cl.Produce(ctx, &kgo.Record{Partition: 0, Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkPostgresUpsert500 upserts 500 rows per statement (unnest of
// arrays, one server-side batch) into a table shaped like the
// projection's kv table: Postgres's floor in rows/s for the projector.
func BenchmarkPostgresUpsert500(b *testing.B) {
	pool := testenv.MustPostgres(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE floor_kv (key text PRIMARY KEY, value jsonb NOT NULL, version bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	const rows = 500
	keys, values, versions := make([]string, rows), make([]string, rows), make([]int64, rows)
	for i := range rows {
		values[i] = `{"n":` + strconv.Itoa(i) + `,"s":"a value of about fifty bytes in all"}`
	}
	b.ResetTimer()
	for it := range b.N {
		// Half the rows are new keys, half update the previous
		// statement's: the projector's mix under a write load.
		for i := range rows {
			keys[i] = fmt.Sprintf("tenant/t/project/p%d/k%09d", i%8, it*rows/2+i)
			versions[i] = int64(it + 1)
		}
		if _, err := pool.Exec(ctx, `INSERT INTO floor_kv (key, value, version)
			SELECT * FROM unnest($1::text[], $2::jsonb[], $3::bigint[])
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, version = excluded.version`, keys, values, versions); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N*rows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkEchoEmpty is the HTTP server's floor: 64 clients over HTTP/1.1
// keep-alive on an echo handler that answers 204 at once, as the writer's
// server is built (echo on net/http).
func BenchmarkEchoEmpty(b *testing.B) {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.PUT("/v1/kv/*", func(c echo.Context) error { return c.NoContent(http.StatusNoContent) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { srv.Close() })
	const clients = 64
	url := "http://" + ln.Addr().String() + "/v1/kv/tenant/t/project/p/k"
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for range clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				put(b, hc, url)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// put sends one small PUT and reads the answer to the end, so the
// connection is reused.
func put(b *testing.B, hc *http.Client, url string) {
	req, _ := http.NewRequest(http.MethodPut, url, http.NoBody)
	resp, err := hc.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}
