package main

import (
	"io"
	"testing"
	"time"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/internal/service/servicetest"
	"github.com/eskv/eskv/projector"
)

// TestVariables: every setting of projector serve reads the variable the
// documentation, the charts and scripts/run-local.sh name.
func TestVariables(t *testing.T) {
	servicetest.Variables(t, func() *service.Flags { return new(serveConfig).flags(io.Discard) }, map[string]string{
		"addr":                             "ESKV_PROJECTOR_ADDR",
		"addr-file":                        "ESKV_PROJECTOR_ADDR_FILE",
		"brokers":                          "ESKV_BROKERS",
		"check-interval":                   "ESKV_PROJECTOR_CHECK_INTERVAL",
		"history-format":                   "ESKV_HISTORY_FORMAT",
		"history-retention":                "ESKV_HISTORY_RETENTION",
		"history-retention-interval":       "ESKV_HISTORY_RETENTION_INTERVAL",
		"http-idle-timeout":                "ESKV_HTTP_IDLE_TIMEOUT",
		"http-max-connections":             "ESKV_HTTP_MAX_CONNECTIONS",
		"http-max-connections-per-address": "ESKV_HTTP_MAX_CONNECTIONS_PER_ADDRESS",
		"http-max-header-bytes":            "ESKV_HTTP_MAX_HEADER_BYTES",
		"http-read-header-timeout":         "ESKV_HTTP_READ_HEADER_TIMEOUT",
		"http-read-timeout":                "ESKV_HTTP_READ_TIMEOUT",
		"http-write-timeout":               "ESKV_HTTP_WRITE_TIMEOUT",
		"instance-id":                      "ESKV_PROJECTOR_ID",
		"kafka-insecure-dev":               "ESKV_KAFKA_INSECURE_DEV",
		"kafka-sasl-mechanism":             "ESKV_KAFKA_SASL_MECHANISM",
		"kafka-sasl-password-file":         "ESKV_KAFKA_SASL_PASSWORD_FILE",
		"kafka-sasl-username":              "ESKV_KAFKA_SASL_USERNAME",
		"kafka-tls":                        "ESKV_KAFKA_TLS",
		"kafka-tls-ca-file":                "ESKV_KAFKA_TLS_CA_FILE",
		"kafka-tls-cert-file":              "ESKV_KAFKA_TLS_CERT_FILE",
		"kafka-tls-insecure-skip-verify":   "ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY",
		"kafka-tls-key-file":               "ESKV_KAFKA_TLS_KEY_FILE",
		"kafka-tls-server-name":            "ESKV_KAFKA_TLS_SERVER_NAME",
		"log-level":                        "ESKV_LOG_LEVEL",
		"metrics-token":                    "ESKV_METRICS_TOKEN",
		"pace":                             "ESKV_PROJECTOR_PACE",
		"partitions":                       "ESKV_PARTITIONS",
		"postgres-url":                     "ESKV_POSTGRES_URL",
		"pprof-addr":                       "ESKV_PPROF_ADDR",
		"topic":                            "ESKV_TOPIC",
	})
}

// TestPaceZeroIsOff: -pace 0 (ESKV_PROJECTOR_PACE=0) means no pacing,
// and projector.Config gets it as off (negative), not as its own default
// (0); unset, Config gets the default pace.
func TestPaceZeroIsOff(t *testing.T) {
	pace := func(args []string) time.Duration {
		t.Helper()
		s := new(serveConfig)
		if err := s.parse(s.flags(io.Discard), args); err != nil {
			t.Fatal(err)
		}
		return s.projectorConfig().Pace
	}
	t.Setenv("ESKV_PROJECTOR_PACE", "")
	if p := pace(nil); p != projector.DefaultPace {
		t.Fatalf("unset: Config's pace %v, want %v", p, projector.DefaultPace)
	}
	if p := pace([]string{"-pace=0"}); p >= 0 {
		t.Fatalf("-pace=0: Config's pace %v, want negative (off)", p)
	}
	t.Setenv("ESKV_PROJECTOR_PACE", "0")
	if p := pace(nil); p >= 0 {
		t.Fatalf("ESKV_PROJECTOR_PACE=0: Config's pace %v, want negative (off)", p)
	}
}
