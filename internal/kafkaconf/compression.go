package kafkaconf

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultCompression is the codec of the writer's produce batches unless
// ESKV_KAFKA_COMPRESSION says otherwise: none. Every Kafka client reads
// uncompressed batches (kafkajs, the most used Node client, reads gzip
// and nothing else without plugins); the changelog's batches are small
// (a transaction round's records of one partition), so a codec saves
// little bandwidth for CPU on the writer at every produce and on the
// brokers, which decompress each compressed batch to validate it
// (docs/consumers.md has the figures).
const DefaultCompression = "none"

// codecs are the codecs ESKV_KAFKA_COMPRESSION names.
var codecs = map[string]kgo.CompressionCodec{
	"none":   kgo.NoCompression(),
	"gzip":   kgo.GzipCompression(),
	"snappy": kgo.SnappyCompression(),
	"lz4":    kgo.Lz4Compression(),
	"zstd":   kgo.ZstdCompression(),
}

// CompressionNames are the values ESKV_KAFKA_COMPRESSION takes, sorted.
func CompressionNames() []string { return slices.Sorted(maps.Keys(codecs)) }

// Compression returns the codec called name (case-insensitive), or an
// error naming the setting and its values.
func Compression(name string) (kgo.CompressionCodec, error) {
	c, ok := codecs[strings.ToLower(name)]
	if !ok {
		return kgo.CompressionCodec{}, fmt.Errorf("%s must be one of %s, got %q",
			Name("compression"), strings.Join(CompressionNames(), ", "), name)
	}
	return c, nil
}
