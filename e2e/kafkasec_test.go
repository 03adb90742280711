package e2e

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/audit"
	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/logcheck"
	"github.com/eskv/eskv/projection"
	"github.com/eskv/eskv/projector"
	"github.com/eskv/eskv/testenv"
	inproc "github.com/eskv/eskv/testenv/stack"
	"github.com/eskv/eskv/writer"
)

// mustConn builds the connection of settings, failing the test on a
// refused setting.
func mustConn(tb testing.TB, s kafkaconf.Settings) kafkaconf.Conn {
	tb.Helper()
	conn, err := s.Conn()
	if err != nil {
		tb.Fatal(err)
	}
	return conn
}

// withSASL returns s with another SASL mechanism and user.
func withSASL(s kafkaconf.Settings, mechanism, user string) kafkaconf.Settings {
	s.SASLMechanism, s.SASLUsername = mechanism, user
	return s
}

// TestKafkaSecurity_WriteThroughSecuredBroker runs every component
// against a broker that requires TLS and SASL: the writer (and its watch
// hub) and projector with SCRAM-SHA-256, the auditor with SCRAM-SHA-512, the read tools
// (logcheck, audit verify) with PLAIN. A write goes through writer →
// projector → Postgres, a watch sees it, the auditor records it, the
// log reads back, and
// the writer's Kafka clients report kprom metrics on its registry.
func TestKafkaSecurity_WriteThroughSecuredBroker(t *testing.T) {
	t.Parallel()
	sb := testenv.MustSecureBroker(t, partitions, false)
	scram256 := mustConn(t, withSASL(sb.Settings, kafkaconf.ScramSHA256, testenv.SecureScram256))
	st := inproc.MustRun(t, inproc.Kafka(sb.Broker, scram256))
	plain := mustConn(t, sb.Settings)
	s := &stack{tb: t, broker: st.Broker, pg: st.Postgres, store: st.Store, url: st.URL, kafka: plain}

	at := mustAuditTrail(t)
	a, err := audit.New(audit.Config{Brokers: sb.Addrs, Topics: sb.Topics, Linger: 20 * time.Millisecond,
		Kafka: mustConn(t, withSASL(sb.Settings, kafkaconf.ScramSHA512, testenv.SecureScram512))},
		at.store, at.keys, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	testenv.RunUntilCleanup(t, "auditor", a.Run)

	const key = "/v1/kv/tenant/acme/project/sec/secured"
	if r := s.do("PUT", key, devToken, `{"value":{"over":"tls"}}`); r.Status != http.StatusOK && r.Status != http.StatusCreated {
		t.Fatalf("PUT through the secured broker: %d %s", r.Status, r.Body)
	}
	waitProjected(t, s)
	if r := s.do("GET", key, devToken, nil); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"over":"tls"`) {
		t.Fatalf("GET after projection: %d %s", r.Status, r.Body)
	}
	// The writer's watch hub tails the log over the secured connection.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for e, err := range client.New(st.URL, devToken).Watch(ctx, client.WatchOptions{Key: strings.TrimPrefix(key, "/v1/kv/"), FromVersion: 1}) {
		if err != nil || e.Version != 1 || !strings.Contains(string(e.Value), `"over":"tls"`) {
			t.Fatalf("watch over the secured broker: %+v, %v", e, err)
		}
		break
	}
	waitAudited(t, s, 60*time.Second)
	if rep := at.verify(t, s); rep.Rows < 1 || len(rep.Discrepancies) > 0 {
		t.Fatalf("audit trail over the secured broker: %d rows, discrepancies %v", rep.Rows, rep.Discrepancies)
	}
	l, err := logcheck.ReadConn(t.Context(), plain, sb.Addrs, sb.Topics)
	if err != nil || len(l.Events) != 1 {
		t.Fatalf("logcheck over TLS+PLAIN: %v, %d events", err, len(l.Events))
	}
	if r := s.do("GET", "/metrics", "", nil); !strings.Contains(string(r.Body), "eskv_kafka_writer_producer_") {
		t.Fatalf("/metrics has no kprom metrics of the writer's producers:\n%.2000s", r.Body)
	}
}

// TestKafkaSecurity_RefusedWithoutCredentials runs each component
// against the secured broker without TLS, then with TLS but without
// SASL: each stops with the broker's refusal (kafkaconf.Refused), not
// after its context's deadline.
func TestKafkaSecurity_RefusedWithoutCredentials(t *testing.T) {
	t.Parallel()
	sb := testenv.MustSecureBroker(t, partitions, false)
	pg := testenv.MustPostgresDB(t)
	store := projection.New(pg.Pool)
	at := mustAuditTrail(t)
	tlsOnly := sb.Settings
	tlsOnly.SASLMechanism, tlsOnly.SASLUsername, tlsOnly.SASLPassword = "", "", ""
	for name, conn := range map[string]kafkaconf.Conn{"plaintext": {}, "tls-without-sasl": mustConn(t, tlsOnly)} {
		t.Run(name, func(t *testing.T) {
			for component, run := range componentRuns(sb, conn, store, at) {
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				err := run(ctx)
				cancel()
				if err == nil || errors.Is(err, context.DeadlineExceeded) || !kafkaconf.Refused(err) {
					t.Errorf("%s without credentials: got %v, want the broker's refusal", component, err)
				} else {
					t.Logf("%s refused: %v", component, err)
				}
			}
		})
	}
}

// componentRuns returns, per component, a run of it against sb over
// conn that returns its first error.
func componentRuns(sb *testenv.SecureBroker, conn kafkaconf.Conn, store *projection.Store, at *auditTrail) map[string]func(context.Context) error {
	discard := slog.New(slog.DiscardHandler)
	return map[string]func(context.Context) error{
		"writer": func(ctx context.Context) error {
			w, err := writer.New(writer.Config{Brokers: sb.Addrs, Kafka: conn, Topics: sb.Topics}, store, discard, prometheus.NewRegistry())
			if err != nil {
				return err
			}
			return w.Run(ctx)
		},
		"projector": func(ctx context.Context) error {
			p, err := projector.New(projector.Config{Brokers: sb.Addrs, Kafka: conn, Topic: sb.Topics.Changes, Partitions: sb.Topics.Partitions},
				store, discard, prometheus.NewRegistry())
			if err != nil {
				return err
			}
			return p.Run(ctx)
		},
		"auditor": func(ctx context.Context) error {
			a, err := audit.New(audit.Config{Brokers: sb.Addrs, Kafka: conn, Topics: sb.Topics}, at.store, at.keys, discard, prometheus.NewRegistry())
			if err != nil {
				return err
			}
			return a.Run(ctx)
		},
		"auditor verify": func(ctx context.Context) error {
			_, err := audit.Verify(ctx, at.store, at.keys, audit.VerifyConfig{Brokers: sb.Addrs, Kafka: conn, Topics: sb.Topics})
			return err
		},
		"projector rebuild": func(ctx context.Context) error {
			_, err := projector.Rebuild(ctx, projector.RebuildConfig{Brokers: sb.Addrs, Kafka: conn, Topic: sb.Topics.Changes, Partitions: sb.Topics.Partitions}, store, discard)
			return err
		},
		"logcheck": func(ctx context.Context) error {
			_, err := logcheck.ReadConn(ctx, conn, sb.Addrs, sb.Topics)
			return err
		},
	}
}

// TestKafkaSecurity_MutualTLS: a broker that requires a client
// certificate refuses a client without one and serves one with it.
func TestKafkaSecurity_MutualTLS(t *testing.T) {
	t.Parallel()
	sb := testenv.MustSecureBroker(t, partitions, true)
	noCert := sb.Settings
	noCert.TLS.CertFile, noCert.TLS.KeyFile = "", ""
	if _, err := logcheck.ReadConn(t.Context(), mustConn(t, noCert), sb.Addrs, sb.Topics); !kafkaconf.Refused(err) {
		t.Fatalf("without a client certificate: got %v, want the broker's refusal", err)
	}
	if _, err := logcheck.ReadConn(t.Context(), mustConn(t, sb.Settings), sb.Addrs, sb.Topics); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
}
