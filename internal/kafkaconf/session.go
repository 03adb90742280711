package kafkaconf

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// A writer's partitions move to another writer when its group session
// expires: a SIGKILLed writer's partitions are served again about one
// session timeout after the kill (docs/operations.md). The brokers bound
// the session timeouts they accept by group.min.session.timeout.ms and
// group.max.session.timeout.ms; a JoinGroup outside them is refused with
// INVALID_SESSION_TIMEOUT.

const (
	// DefaultSessionTimeout is the writers' group session timeout when
	// none is set and the brokers accept it: short enough for a takeover
	// within 5 s, long enough for three heartbeats.
	DefaultSessionTimeout = 3 * time.Second
	// KafkaMinSessionTimeout and KafkaMaxSessionTimeout are Apache
	// Kafka's defaults of group.min.session.timeout.ms and
	// group.max.session.timeout.ms, assumed when the brokers do not tell.
	KafkaMinSessionTimeout = 6 * time.Second
	KafkaMaxSessionTimeout = 30 * time.Minute
)

// SessionBounds are the session timeouts the brokers accept.
type SessionBounds struct {
	Min, Max time.Duration
	// Known reports that a broker told them; otherwise they are Kafka's
	// defaults.
	Known bool
}

// ReadSessionBounds returns the group session timeouts the brokers accept,
// read from a broker's configuration (every broker of a cluster normally
// has the same). When it cannot be read (an ACL without DescribeConfigs
// on the cluster), it returns Kafka's defaults and the error.
func ReadSessionBounds(ctx context.Context, adm *kadm.Client) (SessionBounds, error) {
	b := SessionBounds{Min: KafkaMinSessionTimeout, Max: KafkaMaxSessionTimeout}
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return b, fmt.Errorf("list brokers: %w", err)
	}
	if len(brokers) == 0 {
		return b, errors.New("no broker listed")
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, brokers[0].NodeID)
	for _, rc := range rcs {
		err = errors.Join(err, rc.Err)
	}
	if err != nil {
		return b, fmt.Errorf("describe broker %d: %w", brokers[0].NodeID, err)
	}
	found := 0
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			ms, perr := strconv.ParseInt(*c.Value, 10, 64)
			if perr != nil || ms <= 0 {
				continue
			}
			switch c.Key {
			case "group.min.session.timeout.ms":
				b.Min, found = time.Duration(ms)*time.Millisecond, found+1
			case "group.max.session.timeout.ms":
				b.Max, found = time.Duration(ms)*time.Millisecond, found+1
			}
		}
	}
	if found < 2 {
		return b, fmt.Errorf("broker %d does not tell its group.min.session.timeout.ms and group.max.session.timeout.ms", brokers[0].NodeID)
	}
	b.Known = true
	return b, nil
}

// SessionTimeoutError says the brokers refuse a session timeout that was
// set, and what to change.
type SessionTimeoutError struct {
	Set    time.Duration
	Bounds SessionBounds
}

func (e *SessionTimeoutError) Error() string {
	name := "-kafka-session-timeout (ESKV_KAFKA_SESSION_TIMEOUT)"
	if e.Set < e.Bounds.Min {
		return fmt.Sprintf("%s=%s is below the brokers' group.min.session.timeout.ms=%d: the group coordinator would refuse the writer (INVALID_SESSION_TIMEOUT)\n"+
			"Solution: set group.min.session.timeout.ms=%d (or less) on every broker and restart them, or set ESKV_KAFKA_SESSION_TIMEOUT to at least %s (a takeover then takes about that long)",
			name, e.Set, e.Bounds.Min.Milliseconds(), e.Set.Milliseconds(), e.Bounds.Min)
	}
	return fmt.Sprintf("%s=%s is above the brokers' group.max.session.timeout.ms=%d: the group coordinator would refuse the writer (INVALID_SESSION_TIMEOUT)\n"+
		"Solution: set ESKV_KAFKA_SESSION_TIMEOUT to at most %s",
		name, e.Set, e.Bounds.Max.Milliseconds(), e.Bounds.Max)
}

// ChooseSessionTimeout returns the session timeout a writer joins its
// group with: set when it is not 0 and the brokers accept it (a
// *SessionTimeoutError when they do not; taken as it is when the bounds
// are not Known), else DefaultSessionTimeout raised to the brokers'
// minimum (Kafka's default minimum is 6 s).
func ChooseSessionTimeout(set time.Duration, b SessionBounds) (time.Duration, error) {
	if set != 0 {
		if b.Known && (set < b.Min || set > b.Max) {
			return 0, &SessionTimeoutError{Set: set, Bounds: b}
		}
		return set, nil
	}
	return min(max(DefaultSessionTimeout, b.Min), b.Max), nil
}

// HeartbeatInterval is how often a member of a group with session
// timeout session heartbeats: a third of it, so that a member is dropped
// only after missing about three heartbeats.
func HeartbeatInterval(session time.Duration) time.Duration {
	return session / 3
}
