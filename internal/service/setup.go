package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/projection"
)

// Kafka is where a service finds the changelog: -brokers, -topic,
// -partitions and, for the services that use it, -conflicts-topic.
type Kafka struct {
	Brokers    string
	Topic      string
	Conflicts  string
	Partitions int
}

// Bind defines -brokers, -topic and -partitions on f.
func (k *Kafka) Bind(f *Flags) {
	f.StringVar(&k.Brokers, "brokers", "127.0.0.1:19092", "Kafka seed brokers, comma-separated")
	f.Env("brokers", "ESKV_BROKERS")
	f.StringVar(&k.Topic, "topic", changelog.DefaultChangesTopic, "changes topic")
	f.Env("topic", "ESKV_TOPIC")
	f.IntVar(&k.Partitions, "partitions", changelog.DefaultPartitions, "partition count of the changes topic; never change it once created")
	f.Env("partitions", "ESKV_PARTITIONS")
}

// BindConflicts defines -conflicts-topic on f.
func (k *Kafka) BindConflicts(f *Flags) {
	f.StringVar(&k.Conflicts, "conflicts-topic", changelog.DefaultConflictsTopic, "conflicts topic")
	f.Env("conflicts-topic", "ESKV_CONFLICTS_TOPIC")
}

// BrokerList returns the seed brokers.
func (k *Kafka) BrokerList() []string { return strings.Split(k.Brokers, ",") }

// Topics returns the topics and their partition count.
func (k *Kafka) Topics() changelog.Topics {
	return changelog.Topics{Changes: k.Topic, Conflicts: k.Conflicts, Partitions: int32(k.Partitions)}
}

// Postgres is the projection's database: -postgres-url.
type Postgres struct {
	URL string
}

// Bind defines -postgres-url on f.
func (p *Postgres) Bind(f *Flags) {
	f.StringVar(&p.URL, "postgres-url", "postgres://postgres@127.0.0.1:5432/eskv?sslmode=disable", "Postgres URL of the projection")
	f.Env("postgres-url", "ESKV_POSTGRES_URL")
}

// Open connects to the database.
func (p *Postgres) Open(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := pgxpool.New(ctx, p.URL)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return pool, nil
}

// OpenProjection connects to the database and migrates the projection
// to the current schema.
func (p *Postgres) OpenProjection(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := p.Open(ctx)
	if err != nil {
		return nil, err
	}
	if err := projection.Migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}
