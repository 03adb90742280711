package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/contract"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/secure"
	"github.com/eskv/eskv/projection"
)

// Kafka is where a service finds the changelog: -brokers, -topic,
// -partitions and, for the services that use it, -conflicts-topic; and
// how it connects: the -kafka-tls… and -kafka-sasl… settings.
type Kafka struct {
	Brokers    string
	Topic      string
	Conflicts  string
	Partitions int
	Security   kafkaconf.Settings

	// Getenv reads the variables that are no flags (the SASL password);
	// nil: os.Getenv.
	Getenv func(string) string

	conn kafkaconf.Conn // built by Check
}

// Bind defines -brokers, -topic, -partitions and the connection
// settings on f.
func (k *Kafka) Bind(f *Flags) {
	f.StringVar(&k.Brokers, "brokers", "127.0.0.1:19092", "Kafka seed brokers, comma-separated")
	f.StringVar(&k.Topic, "topic", changelog.DefaultChangesTopic, "changes topic")
	f.IntVar(&k.Partitions, "partitions", changelog.DefaultPartitions, "partition count of the changes topic; never change it once created")
	s := &k.Security
	BindTLS(f, "kafka", &s.TLS)
	f.BoolVar(&s.InsecureDev, "kafka-insecure-dev", false,
		"allow Kafka settings that are unsafe outside a developer's machine: -kafka-tls-insecure-skip-verify, SASL PLAIN without TLS")
	f.StringVar(&s.SASLMechanism, "kafka-sasl-mechanism", "", "SASL mechanism: plain, scram-sha-256 or scram-sha-512; empty: no SASL")
	f.StringVar(&s.SASLUsername, "kafka-sasl-username", "", "SASL user name; the password is read from ESKV_KAFKA_SASL_PASSWORD only, or from -kafka-sasl-password-file")
	f.StringVar(&s.SASLPasswordFile, "kafka-sasl-password-file", "", "file holding the SASL password (a mounted secret), read again at every authentication")
}

// Check checks the connection settings and builds the connection Conn
// returns, reading the SASL password from ESKV_KAFKA_SASL_PASSWORD;
// errors name the setting at fault.
func (k *Kafka) Check() error {
	getenv := k.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	s := k.Security
	s.SASLPassword = getenv("ESKV_KAFKA_SASL_PASSWORD")
	conn, err := s.Conn()
	k.conn = conn
	return err
}

// Conn is the Kafka connection of the settings, once Check accepted
// them.
func (k *Kafka) Conn() kafkaconf.Conn { return k.conn }

// BindTLS defines -<prefix>-tls, -<prefix>-tls-ca-file,
// -<prefix>-tls-cert-file, -<prefix>-tls-key-file,
// -<prefix>-tls-server-name and -<prefix>-tls-insecure-skip-verify on f
// (ESKV_<PREFIX>_TLS…, as secure.Variable names them).
func BindTLS(f *Flags, prefix string, t *secure.TLS) {
	f.BoolVar(&t.Enabled, prefix+"-tls", false, "connect to "+prefix+" over TLS (implied by any other -"+prefix+"-tls-… setting)")
	f.StringVar(&t.CAFile, prefix+"-tls-ca-file", "", "PEM file of the CAs that sign the "+prefix+" servers' certificates; empty: the system's roots")
	f.StringVar(&t.CertFile, prefix+"-tls-cert-file", "", "PEM client certificate for mutual TLS, with -"+prefix+"-tls-key-file")
	f.StringVar(&t.KeyFile, prefix+"-tls-key-file", "", "PEM private key of -"+prefix+"-tls-cert-file")
	f.StringVar(&t.ServerName, prefix+"-tls-server-name", "", "name expected in the servers' certificates; empty: the host dialled")
	f.BoolVar(&t.InsecureSkipVerify, prefix+"-tls-insecure-skip-verify", false, "accept any server certificate; refused without -"+prefix+"-insecure-dev")
}

// BindConflicts defines -conflicts-topic on f.
func (k *Kafka) BindConflicts(f *Flags) {
	f.StringVar(&k.Conflicts, "conflicts-topic", changelog.DefaultConflictsTopic, "conflicts topic")
}

// BrokerList returns the seed brokers.
func (k *Kafka) BrokerList() []string { return strings.Split(k.Brokers, ",") }

// Topics returns the topics and their partition count.
func (k *Kafka) Topics() changelog.Topics {
	return changelog.Topics{Changes: k.Topic, Conflicts: k.Conflicts, Partitions: int32(k.Partitions)}
}

// Retry's pauses between attempts while a dependency does not answer:
// doubling from openRetryMin to openRetryMax.
const (
	openRetryMin = 200 * time.Millisecond
	openRetryMax = 5 * time.Second
)

// Retry calls open until it succeeds, fails with an error unreachable
// does not report, or ctx ends (then ctx's cause). Before each new
// attempt it logs a warning that what does not answer, and waits, from
// 0.2 s doubling up to 5 s. A service opens its dependencies through it
// at start: started during a network partition or a dependency's
// restart, it then starts once the dependency answers, instead of
// exiting and being restarted with an ever longer back-off (chaos saw a
// writer restarted into a cut from Postgres exit ten times in ten
// seconds). Any other error (a refused password, a bad schema) ends it
// at once.
func Retry(ctx context.Context, log *slog.Logger, what string, unreachable func(error) bool, open func(context.Context) error) error {
	r := changelog.Retry{Base: openRetryMin, Cap: openRetryMax, Retriable: unreachable, OnRetry: func(err error, wait time.Duration) {
		log.Warn(what+" does not answer; trying again", "err", err, "retry_in", wait)
	}}
	return r.Do(ctx, open)
}

// Postgres is the projection's database: -postgres-url.
type Postgres struct {
	URL string
}

// Bind defines -postgres-url on f.
func (p *Postgres) Bind(f *Flags) {
	f.StringVar(&p.URL, "postgres-url", "postgres://postgres@127.0.0.1:5432/eskv?sslmode=disable", "Postgres URL of the projection")
}

// Open connects to the database.
func (p *Postgres) Open(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, p.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}

// OpenProjection connects to the database, migrates the projection to
// the current schema and registers the pool's metrics
// (eskv_pgxpool_*{pool="projection"}) on reg unless it is nil. While the
// database cannot be reached (partition_unavailable), it tries again
// until ctx ends (Retry).
func (p *Postgres) OpenProjection(ctx context.Context, reg prometheus.Registerer, log *slog.Logger) (*pgxpool.Pool, error) {
	pool, err := p.Open(ctx)
	if err != nil {
		return nil, err
	}
	err = Retry(ctx, log, "the projection database", func(err error) bool {
		e, ok := errors.AsType[*contract.Error](err)
		return ok && e.Code == contract.EUnavailable
	}, func(ctx context.Context) error { return projection.Migrate(ctx, pool) })
	if err != nil {
		pool.Close()
		return nil, err
	}
	if reg != nil {
		if err := reg.Register(NewPoolCollector(pool, "projection")); err != nil {
			pool.Close()
			return nil, fmt.Errorf("postgres pool metrics: %w", err)
		}
	}
	return pool, nil
}
