package main

import (
	"io"
	"testing"

	"github.com/eskv/eskv/internal/service"
	"github.com/eskv/eskv/internal/service/servicetest"
)

// TestVariables: every setting of auditor serve reads the variable the
// documentation, the charts and scripts/run-local.sh name.
func TestVariables(t *testing.T) {
	servicetest.Variables(t, func() *service.Flags {
		f, _ := newFlags("serve", io.Discard)
		serveFlags(f)
		return f
	}, map[string]string{
		"addr":                                "ESKV_AUDITOR_ADDR",
		"addr-file":                           "ESKV_AUDITOR_ADDR_FILE",
		"alert-interval":                      "ESKV_ALERT_INTERVAL",
		"alert-min-attempts":                  "ESKV_ALERT_MIN_ATTEMPTS",
		"alert-threshold":                     "ESKV_ALERT_THRESHOLD",
		"alert-window":                        "ESKV_ALERT_WINDOW",
		"brokers":                             "ESKV_BROKERS",
		"clickhouse-addr":                     "ESKV_CLICKHOUSE_ADDR",
		"clickhouse-database":                 "ESKV_CLICKHOUSE_DATABASE",
		"clickhouse-insecure-dev":             "ESKV_CLICKHOUSE_INSECURE_DEV",
		"clickhouse-password-file":            "ESKV_CLICKHOUSE_PASSWORD_FILE",
		"clickhouse-tls":                      "ESKV_CLICKHOUSE_TLS",
		"clickhouse-tls-ca-file":              "ESKV_CLICKHOUSE_TLS_CA_FILE",
		"clickhouse-tls-cert-file":            "ESKV_CLICKHOUSE_TLS_CERT_FILE",
		"clickhouse-tls-insecure-skip-verify": "ESKV_CLICKHOUSE_TLS_INSECURE_SKIP_VERIFY",
		"clickhouse-tls-key-file":             "ESKV_CLICKHOUSE_TLS_KEY_FILE",
		"clickhouse-tls-server-name":          "ESKV_CLICKHOUSE_TLS_SERVER_NAME",
		"clickhouse-user":                     "ESKV_CLICKHOUSE_USER",
		"conflicts-topic":                     "ESKV_CONFLICTS_TOPIC",
		"group":                               "ESKV_AUDITOR_GROUP",
		"http-idle-timeout":                   "ESKV_HTTP_IDLE_TIMEOUT",
		"http-max-connections":                "ESKV_HTTP_MAX_CONNECTIONS",
		"http-max-connections-per-address":    "ESKV_HTTP_MAX_CONNECTIONS_PER_ADDRESS",
		"http-max-header-bytes":               "ESKV_HTTP_MAX_HEADER_BYTES",
		"http-read-header-timeout":            "ESKV_HTTP_READ_HEADER_TIMEOUT",
		"http-read-timeout":                   "ESKV_HTTP_READ_TIMEOUT",
		"http-write-timeout":                  "ESKV_HTTP_WRITE_TIMEOUT",
		"insecure-dev-key":                    "ESKV_AUDIT_INSECURE_DEV_KEY",
		"instance-id":                         "ESKV_AUDITOR_ID",
		"kafka-insecure-dev":                  "ESKV_KAFKA_INSECURE_DEV",
		"kafka-sasl-mechanism":                "ESKV_KAFKA_SASL_MECHANISM",
		"kafka-sasl-password-file":            "ESKV_KAFKA_SASL_PASSWORD_FILE",
		"kafka-sasl-username":                 "ESKV_KAFKA_SASL_USERNAME",
		"kafka-tls":                           "ESKV_KAFKA_TLS",
		"kafka-tls-ca-file":                   "ESKV_KAFKA_TLS_CA_FILE",
		"kafka-tls-cert-file":                 "ESKV_KAFKA_TLS_CERT_FILE",
		"kafka-tls-insecure-skip-verify":      "ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY",
		"kafka-tls-key-file":                  "ESKV_KAFKA_TLS_KEY_FILE",
		"kafka-tls-server-name":               "ESKV_KAFKA_TLS_SERVER_NAME",
		"key-file":                            "ESKV_AUDIT_KEY_FILE",
		"key-id":                              "ESKV_AUDIT_KEY_ID",
		"linger":                              "ESKV_AUDITOR_LINGER",
		"log-level":                           "ESKV_LOG_LEVEL",
		"max-batch":                           "ESKV_AUDITOR_MAX_BATCH",
		"metrics-token":                       "ESKV_METRICS_TOKEN",
		"partitions":                          "ESKV_PARTITIONS",
		"pprof-addr":                          "ESKV_PPROF_ADDR",
		"topic":                               "ESKV_TOPIC",
		"verify-interval":                     "ESKV_VERIFY_INTERVAL",
	})
}
