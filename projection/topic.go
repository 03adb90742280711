package projection

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// Topic is the identity of the changes topic a projection is folded from.
type Topic struct {
	Name string
	// ID is the Kafka topic ID: a topic deleted and recreated under the
	// same name gets another one.
	ID         string
	Partitions int32
	// FirstSeen is when the projection recorded the topic (zero on input).
	FirstSeen time.Time
}

const claimTopic = `
WITH ins AS (
    INSERT INTO projector_topic (topic, topic_id, partitions) VALUES ($1, $2, $3)
    ON CONFLICT (topic) DO NOTHING
    RETURNING topic_id, partitions, first_seen
)
SELECT topic_id, partitions, first_seen FROM ins
UNION ALL
SELECT topic_id, partitions, first_seen FROM projector_topic WHERE topic = $1
LIMIT 1`

// ClaimTopic records t as the topic the projection is folded from, unless
// a topic of that name is recorded already, and returns the recorded one;
// the caller compares the two. The first projector to start (or a
// rebuild) records it.
func (s *Store) ClaimTopic(ctx context.Context, t Topic) (Topic, error) {
	got := Topic{Name: t.Name}
	// A concurrent first claim makes the statement see neither row (its
	// snapshot predates the other insert): the second try sees it.
	for range 2 {
		err := s.pool.QueryRow(ctx, claimTopic, t.Name, t.ID, t.Partitions).Scan(&got.ID, &got.Partitions, &got.FirstSeen)
		if err == nil {
			got.FirstSeen = got.FirstSeen.UTC()
			return got, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return Topic{}, translate("claim topic", err)
		}
	}
	return Topic{}, translate("claim topic", pgx.ErrNoRows)
}
