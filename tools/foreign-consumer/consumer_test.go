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
	"github.com/eskv/eskv/testenv/stack"
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
// both topics as the writer produces them by default (no compression;
// it cannot read snappy, franz-go's default), read_committed: every
// record is valid under schemas/events and carries its CloudEvents
// headers, and no record of an aborted or open transaction (written
// gzip-compressed, the one codec kafkajs reads) reaches it.
func TestForeignConsumer(t *testing.T) {
	t.Parallel()
	node := mustNode(t)
	s := stack.MustRun(t)
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
	fmt.Printf("foreign consumer (%s, %s): %s %d records, %d schema-valid; %s %d records, %d schema-valid; invalid %d, uncommitted %d\n",
		sum.Client, sum.Isolation, s.Broker.Topics.Changes, changes.Records, changes.SchemaValid,
		s.Broker.Topics.Conflicts, confl.Records, confl.SchemaValid, sum.Invalid, sum.Uncommitted)
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
