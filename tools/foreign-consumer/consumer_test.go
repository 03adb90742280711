// Package foreignconsumer checks eskv's changelog against a consumer
// outside Go: consume.js, on kafkajs (docs/consumers.md).
package foreignconsumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// uncommittedPrefix starts the keys of the records written in
// transactions that are aborted or still open.
const uncommittedPrefix = "tenant/foreign/project/uncommitted/"

// summary is consume.js's output.
type summary struct {
	Client      string `json:"client"`
	Isolation   string `json:"isolation"`
	Topics      map[string]struct{ Records, SchemaValid, Invalid, Uncommitted int }
	Invalid     int      `json:"invalid"`
	Uncommitted int      `json:"uncommitted"`
	Errors      []string `json:"errors"`
}

// TestForeignConsumer: kafkajs, the most used Node Kafka client, reads
// both topics as the writer produces them, read_committed: every record
// is valid under schemas/events and carries its CloudEvents headers, and
// no record of an aborted or open transaction reaches it. By default
// the writer's batches are uncompressed (they were snappy, franz-go's
// default, which kafkajs cannot read: it then reads nothing); with
// ESKV_KAFKA_COMPRESSION=gzip they are gzip, the codec kafkajs reads.
func TestForeignConsumer(t *testing.T) {
	t.Parallel()
	node := mustNode(t)
	for _, tc := range []struct {
		name        string
		compression string // "": the writer's default
		want        uint8  // the codec of the batches on the wire
	}{
		{"default none is read", "", 0},
		{"gzip is read", "gzip", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []stack.Option
			if tc.compression != "" {
				codec, err := kafkaconf.Compression(tc.compression)
				if err != nil {
					t.Fatal(err)
				}
				opts = append(opts, stack.WriterConfig(func(c *writer.Config) { c.Compression = codec }))
			}
			s := stack.MustRun(t, opts...)
			consume(t, node, s, tc.want)
		})
	}
}

// consume writes versions 1–20 of a key, a set member and three stale
// CAS writes through s, then records of an aborted and of an open
// transaction, checks that the writer's batches have codec want, and
// runs consume.js on both topics.
func consume(t *testing.T, node string, s *stack.Stack, want uint8) {
	t.Helper()
	ctx := context.Background()
	c := client.New(s.URL, stack.DevToken)
	const key = "tenant/foreign/project/p/cursor"
	for v := 1; v <= 20; v++ {
		if _, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`{"cursor":` + strconv.Itoa(v) + `}`),
			Semantics: contract.Semantics{Purpose: "checkpoint"}}); err != nil {
			t.Fatalf("version %d: %v", v, err)
		}
	}
	if _, err := c.SAdd(ctx, client.SetRequest{Key: "tenant/foreign/project/p/members", Member: "m1"}); err != nil {
		t.Fatal(err)
	}
	const conflicts = 3
	for i := range conflicts {
		stale := int64(i + 1)
		_, err := c.Put(ctx, client.PutRequest{Key: key, Value: json.RawMessage(`{"cursor":0}`), ExpectedVersion: &stale})
		if ce, ok := errors.AsType[*contract.Error](err); !ok || ce.Code != contract.EConflict {
			t.Fatalf("stale CAS %d: %v, want a conflict", i, err)
		}
	}
	if got := codecs(t, s, 21+conflicts); len(got) != 1 || !got[want] {
		t.Fatalf("the writer's batches have codecs %v (0 none, 1 gzip, 2 snappy), want only %d", got, want)
	}
	open := mustUncommitted(t, s)
	defer open()

	out, err := exec.Command(node, "consume.js", "-brokers", s.Broker.Addrs[0],
		"-changes", s.Broker.Topics.Changes, "-conflicts", s.Broker.Topics.Conflicts,
		"-want-changes", "21", "-want-conflicts", strconv.Itoa(conflicts), "-uncommitted-prefix", uncommittedPrefix,
		"-timeout-ms", "60000").Output()
	t.Logf("consume.js: %s", out)
	var sum summary
	if jerr := json.Unmarshal(out, &sum); jerr != nil {
		t.Fatalf("consume.js: %v, output %q: %v", err, out, jerr)
	}
	changes, confl := sum.Topics[s.Broker.Topics.Changes], sum.Topics[s.Broker.Topics.Conflicts]
	if err != nil || sum.Invalid != 0 || sum.Uncommitted != 0 || len(sum.Errors) != 0 ||
		changes.Records != 21 || changes.SchemaValid != 21 || confl.Records != conflicts || confl.SchemaValid != conflicts {
		t.Fatalf("consume.js: %v; want 21 changes and %d conflicts, all schema-valid, none invalid or uncommitted", err, conflicts)
	}
	fmt.Printf("foreign consumer (%s, %s, writer codec %d): %s %d records, %d schema-valid; %s %d records, %d schema-valid; invalid %d, uncommitted %d\n",
		sum.Client, sum.Isolation, want, s.Broker.Topics.Changes, changes.Records, changes.SchemaValid,
		s.Broker.Topics.Conflicts, confl.Records, confl.SchemaValid, sum.Invalid, sum.Uncommitted)
}

// codecs returns the compression codecs of the batches of the first n
// committed records of both topics.
func codecs(t *testing.T, s *stack.Stack, n int) map[uint8]bool {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(s.Broker.Addrs...), kgo.ConsumeTopics(s.Broker.Topics.Changes, s.Broker.Topics.Conflicts),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := map[uint8]bool{}
	for read := 0; read < n; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d of %d records: %v", read, n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			got[r.Attrs.CompressionType()] = true
		})
	}
	return got
}

// mustUncommitted writes records under uncommittedPrefix to both topics
// in a transaction it aborts, then in one it leaves open until the
// returned function aborts it; both gzip-compressed.
func mustUncommitted(t *testing.T, s *stack.Stack) (abort func()) {
	t.Helper()
	ctx := context.Background()
	txn := func(id string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(s.Broker.Addrs...), kgo.TransactionalID(id),
			kgo.ProducerBatchCompression(kgo.GzipCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for v := int64(1); v <= 3; v++ {
			e := &contract.Event{SchemaVersion: 1, Key: uncommittedPrefix + id, Scope: "tenant/foreign/project/uncommitted", Version: v, PrevVersion: v - 1,
				Kind: contract.KindPut, Op: contract.OpSet, After: json.RawMessage(`1`), Principal: "p", TS: time.Now(), CreatedAt: time.Now()}
			r, err := changelog.Record(e, s.Broker.Topics.Changes, 0, "foreign-test")
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, r, &kgo.Record{Topic: s.Broker.Topics.Conflicts, Partition: 0, Key: []byte(e.Key), Value: []byte(`{}`)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	aborted := txn("foreign-aborted")
	if err := aborted.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	aborted.Close()
	pending := txn("foreign-open")
	return func() {
		if err := pending.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Error(err)
		}
		pending.Close()
	}
}

// mustNode returns node's path once consume.js's dependencies are
// installed (npm ci, from package-lock.json, when node_modules is
// missing).
func mustNode(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is required (apt-get install nodejs npm): %v", err)
	}
	if _, err := os.Stat("node_modules/kafkajs/package.json"); err == nil {
		return node
	}
	var out bytes.Buffer
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out.Bytes())
	}
	return node
}
