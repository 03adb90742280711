package changelog

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultMaxMessageBytes is Kafka's default message.max.bytes (and so
// max.message.bytes of a topic that does not set it): the largest record
// batch a broker appends, in bytes.
const DefaultMaxMessageBytes = 1048588

// MaxMessageBytes returns the largest record batch the brokers append to
// each of topics: the topic's max.message.bytes (DescribeConfigs answers
// the broker's message.max.bytes when the topic does not set it), else
// the broker's message.max.bytes when the topic's configuration cannot be
// read. An error means neither could be read.
func MaxMessageBytes(ctx context.Context, adm *kadm.Client, topics ...string) (map[string]int, error) {
	out := make(map[string]int, len(topics))
	rcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	for _, rc := range rcs {
		if rc.Err != nil {
			continue
		}
		for _, c := range rc.Configs {
			if c.Key == "max.message.bytes" && c.Value != nil {
				if n, perr := strconv.Atoi(*c.Value); perr == nil && n > 0 {
					out[rc.Name] = n
				}
			}
		}
	}
	var missing []string
	for _, t := range topics {
		if _, ok := out[t]; !ok {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return out, nil
	}
	n, berr := brokerMaxMessageBytes(ctx, adm)
	if berr != nil {
		return nil, fmt.Errorf("max.message.bytes of %v: %w", missing, errors.Join(err, berr))
	}
	for _, t := range missing {
		out[t] = n
	}
	return out, nil
}

// brokerMaxMessageBytes returns message.max.bytes of a broker of the
// cluster.
func brokerMaxMessageBytes(ctx context.Context, adm *kadm.Client) (int, error) {
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return 0, fmt.Errorf("list brokers: %w", err)
	}
	if len(brokers) == 0 {
		return 0, errors.New("no broker listed")
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	if err != nil {
		return 0, fmt.Errorf("describe broker %d: %w", brokers[0].NodeID, err)
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == "message.max.bytes" && c.Value != nil {
				if n, err := strconv.Atoi(*c.Value); err == nil && n > 0 {
					return n, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("broker %d does not tell its message.max.bytes", brokers[0].NodeID)
}

// The sizes a record batch (v2, the only one eskv writes) adds to its
// records, at most: its header, and per record the varints of its
// length, attributes, timestamp and offset deltas, key and value lengths
// and header count, and each header's two lengths.
const (
	BatchOverhead  = 61
	recordOverhead = 5 + 1 + 10 + 5 + 5 + 5 + 5
	headerOverhead = 5 + 5
)

// RecordBytes is at least the bytes r takes in an uncompressed record
// batch (kgo measures a batch against its limit uncompressed, and a
// broker compressed).
func RecordBytes(r *kgo.Record) int {
	n := recordOverhead + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += headerOverhead + len(h.Key) + len(h.Value)
	}
	return n
}
