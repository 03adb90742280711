package main

import (
	"io"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/writer"
)

// TestVariables: every setting of the writer reads the variable the
// documentation, the charts and scripts/run-local.sh name.
func TestVariables(t *testing.T) {
	servicetest.Variables(t, func() *service.Flags { return new(config).flags(io.Discard) }, map[string]string{
		"addr-file":                        "ESKV_ADDR_FILE",
		"advertise-url":                    "ESKV_ADVERTISE_URL",
		"auditor-group":                    "ESKV_AUDITOR_GROUP",
		"auditor-token":                    "ESKV_AUDITOR_TOKEN",
		"auditor-url":                      "ESKV_AUDITOR_URL",
		"brokers":                          "ESKV_BROKERS",
		"conflicts-topic":                  "ESKV_CONFLICTS_TOPIC",
		"cors-allowed-origins":             "ESKV_CORS_ALLOWED_ORIGINS",
		"create-topics":                    "ESKV_CREATE_TOPICS",
		"dev-token":                        "ESKV_DEV_TOKEN",
		"http-addr":                        "ESKV_HTTP_ADDR",
		"http-idle-timeout":                "ESKV_HTTP_IDLE_TIMEOUT",
		"http-max-connections":             "ESKV_HTTP_MAX_CONNECTIONS",
		"http-max-connections-per-address": "ESKV_HTTP_MAX_CONNECTIONS_PER_ADDRESS",
		"http-max-header-bytes":            "ESKV_HTTP_MAX_HEADER_BYTES",
		"http-read-header-timeout":         "ESKV_HTTP_READ_HEADER_TIMEOUT",
		"http-read-timeout":                "ESKV_HTTP_READ_TIMEOUT",
		"http-write-timeout":               "ESKV_HTTP_WRITE_TIMEOUT",
		"instance-id":                      "ESKV_WRITER_ID",
		"kafka-compression":                "ESKV_KAFKA_COMPRESSION",
		"kafka-insecure-dev":               "ESKV_KAFKA_INSECURE_DEV",
		"kafka-session-timeout":            "ESKV_KAFKA_SESSION_TIMEOUT",
		"kafka-transaction-timeout":        "ESKV_KAFKA_TRANSACTION_TIMEOUT",
		"kafka-sasl-mechanism":             "ESKV_KAFKA_SASL_MECHANISM",
		"kafka-sasl-password-file":         "ESKV_KAFKA_SASL_PASSWORD_FILE",
		"kafka-sasl-username":              "ESKV_KAFKA_SASL_USERNAME",
		"kafka-tls":                        "ESKV_KAFKA_TLS",
		"kafka-tls-ca-file":                "ESKV_KAFKA_TLS_CA_FILE",
		"kafka-tls-cert-file":              "ESKV_KAFKA_TLS_CERT_FILE",
		"kafka-tls-insecure-skip-verify":   "ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY",
		"kafka-tls-key-file":               "ESKV_KAFKA_TLS_KEY_FILE",
		"kafka-tls-server-name":            "ESKV_KAFKA_TLS_SERVER_NAME",
		"log-flush":                        "ESKV_LOG_FLUSH",
		"log-level":                        "ESKV_LOG_LEVEL",
		"max-body-bytes":                   "ESKV_MAX_BODY_BYTES",
		"max-body-bytes-per-principal":     "ESKV_MAX_BODY_BYTES_PER_PRINCIPAL",
		"max-concurrent-lists":             "ESKV_MAX_CONCURRENT_LISTS",
		"max-list-bytes":                   "ESKV_MAX_LIST_BYTES",
		"max-list-wait":                    "ESKV_MAX_LIST_WAIT",
		"max-lists-per-principal":          "ESKV_MAX_LISTS_PER_PRINCIPAL",
		"max-overlay":                      "ESKV_MAX_OVERLAY",
		"max-value-bytes":                  "ESKV_MAX_VALUE_BYTES",
		"max-waiters":                      "ESKV_MAX_WAITERS",
		"max-waiters-per-principal":        "ESKV_MAX_WAITERS_PER_PRINCIPAL",
		"max-watches":                      "ESKV_MAX_WATCHES",
		"max-watches-per-principal":        "ESKV_MAX_WATCHES_PER_PRINCIPAL",
		"metrics-addr":                     "ESKV_METRICS_ADDR",
		"metrics-token":                    "ESKV_METRICS_TOKEN",
		"partitions":                       "ESKV_PARTITIONS",
		"peer-secret":                      "ESKV_PEER_SECRET",
		"peer-secret-file":                 "ESKV_PEER_SECRET_FILE",
		"postgres-url":                     "ESKV_POSTGRES_URL",
		"pprof-addr":                       "ESKV_PPROF_ADDR",
		"queue-dedup-window":               "ESKV_QUEUE_DEDUP_WINDOW",
		"read-lease":                       "ESKV_READ_LEASE",
		"request-id-age":                   "ESKV_REQUEST_ID_AGE",
		"request-id-window":                "ESKV_REQUEST_ID_WINDOW",
		"request-timeout":                  "ESKV_REQUEST_TIMEOUT",
		"round-gather":                     "ESKV_ROUND_GATHER",
		"state-cache-bytes":                "ESKV_STATE_CACHE_BYTES",
		"sweep-interval":                   "ESKV_SWEEP_INTERVAL",
		"tls-ca-file":                      "ESKV_TLS_CA_FILE",
		"tls-cert-file":                    "ESKV_TLS_CERT_FILE",
		"tls-key-file":                     "ESKV_TLS_KEY_FILE",
		"tokens-file":                      "ESKV_TOKENS_FILE",
		"tokens-poll":                      "ESKV_TOKENS_POLL",
		"topic":                            "ESKV_TOPIC",
		"ui-key-file":                      "ESKV_UI_KEY_FILE",
		"ui-session-ttl":                   "ESKV_UI_SESSION_TTL",
		"watch-buffer":                     "ESKV_WATCH_BUFFER",
		"watch-buffer-bytes":               "ESKV_WATCH_BUFFER_BYTES",
		"watch-fetch-wait":                 "ESKV_WATCH_FETCH_WAIT",
		"watch-heartbeat":                  "ESKV_WATCH_HEARTBEAT",
		"watch-memory-bytes":               "ESKV_WATCH_MEMORY_BYTES",
		"watch-stall-timeout":              "ESKV_WATCH_STALL_TIMEOUT",
	})
}

// TestZeroIsOff: a setting whose 0 turns its feature off means the same
// on the command line and in the environment, and writer.Config gets it
// as off (negative), not as its own default (0); unset, Config gets the
// setting's default.
func TestZeroIsOff(t *testing.T) {
	for _, tc := range []struct {
		flag string
		get  func(writer.Config) int64
	}{
		{"read-lease", func(c writer.Config) int64 { return int64(c.ReadLease) }},
		{"request-id-age", func(c writer.Config) int64 { return int64(c.RequestIDAge) }},
		{"round-gather", func(c writer.Config) int64 { return int64(c.RoundGather) }},
		{"state-cache-bytes", func(c writer.Config) int64 { return c.StateCacheBytes }},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			variable := service.Variable(service.Prefix, tc.flag)
			t.Setenv(variable, "")
			c, err := parse(nil, io.Discard)
			if err != nil || tc.get(c.writerConfig()) <= 0 {
				t.Fatalf("unset: %v, Config's %d, want the setting's positive default", err, tc.get(c.writerConfig()))
			}
			if c, err = parse([]string{"-" + tc.flag + "=0"}, io.Discard); err != nil || tc.get(c.writerConfig()) >= 0 {
				t.Fatalf("-%s=0: %v, Config's %d, want negative (off)", tc.flag, err, tc.get(c.writerConfig()))
			}
			t.Setenv(variable, "0")
			if c, err = parse(nil, io.Discard); err != nil || tc.get(c.writerConfig()) >= 0 {
				t.Fatalf("%s=0: %v, Config's %d, want negative (off)", variable, err, tc.get(c.writerConfig()))
			}
		})
	}
}

// TestCompression: ESKV_KAFKA_COMPRESSION picks the codec of the
// produced batches, none when unset (never franz-go's default, snappy);
// an unknown codec stops the writer at start, naming the setting.
func TestCompression(t *testing.T) {
	t.Run("unset is none", func(t *testing.T) {
		t.Setenv("ESKV_KAFKA_COMPRESSION", "")
		c, err := parse(nil, io.Discard)
		if err != nil || c.writerConfig().Compression != kgo.NoCompression() {
			t.Fatalf("got %v, %+v; want none", err, c.writerConfig().Compression)
		}
	})
	t.Run("gzip is gzip", func(t *testing.T) {
		t.Setenv("ESKV_KAFKA_COMPRESSION", "gzip")
		c, err := parse(nil, io.Discard)
		if err != nil || c.writerConfig().Compression != kgo.GzipCompression() {
			t.Fatalf("got %v, %+v; want gzip", err, c.writerConfig().Compression)
		}
	})
	t.Run("unknown is refused", func(t *testing.T) {
		_, err := parse([]string{"-kafka-compression=brotli"}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "ESKV_KAFKA_COMPRESSION") || !strings.Contains(err.Error(), "gzip, lz4, none, snappy, zstd") {
			t.Fatalf("got %v; want an error naming the setting and its values", err)
		}
	})
}
