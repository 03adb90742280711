package kafkaconf_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/internal/kafkaconf"
)

// TestSessionTimeout: the bounds are read from the broker; unset, the
// writer's session is 3 s where the broker accepts it and the broker's
// minimum otherwise; a set value the broker refuses is an error whose
// Solution names the broker's setting; unknown bounds accept what is set.
func TestSessionTimeout(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name     string
		opts     []kfake.Opt
		min      time.Duration
		auto     time.Duration
		set      time.Duration
		refused  bool
		solution string
	}{
		{"KafkaDefaultMin", nil, 6 * time.Second, 6 * time.Second, 3 * time.Second, true, "group.min.session.timeout.ms=3000"},
		{"LoweredMin", []kfake.Opt{kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": "1000"})}, time.Second, 3 * time.Second, 2 * time.Second, false, ""},
		{"AboveMax", []kfake.Opt{kfake.BrokerConfigs(map[string]string{"group.max.session.timeout.ms": "20000"})}, 6 * time.Second, 6 * time.Second, time.Minute, true, "at most 20s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.Ports(0)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			b, err := kafkaconf.ReadSessionBounds(ctx, kadm.NewClient(cl))
			if err != nil || !b.Known || b.Min != tc.min {
				t.Fatalf("ReadSessionBounds: %+v, %v; want min %s, known", b, err, tc.min)
			}
			if got, err := kafkaconf.ChooseSessionTimeout(0, b); err != nil || got != tc.auto {
				t.Errorf("unset: %s, %v; want %s", got, err, tc.auto)
			}
			got, err := kafkaconf.ChooseSessionTimeout(tc.set, b)
			var se *kafkaconf.SessionTimeoutError
			if tc.refused != errors.As(err, &se) || (!tc.refused && got != tc.set) {
				t.Fatalf("set %s: %s, %v; want refused %v", tc.set, got, err, tc.refused)
			}
			if tc.refused && (!strings.Contains(err.Error(), "ESKV_KAFKA_SESSION_TIMEOUT") || !strings.Contains(err.Error(), "\nSolution: ") ||
				!strings.Contains(err.Error(), tc.solution)) {
				t.Errorf("refusal %q; want ESKV_KAFKA_SESSION_TIMEOUT and a Solution line saying %q", err, tc.solution)
			}
		})
	}
	t.Run("UnknownBoundsTakeTheSetValue", func(t *testing.T) {
		b := kafkaconf.SessionBounds{Min: kafkaconf.KafkaMinSessionTimeout, Max: kafkaconf.KafkaMaxSessionTimeout}
		if got, err := kafkaconf.ChooseSessionTimeout(2*time.Second, b); err != nil || got != 2*time.Second {
			t.Errorf("got %s, %v; want 2s", got, err)
		}
		if got, _ := kafkaconf.ChooseSessionTimeout(0, b); got != 6*time.Second {
			t.Errorf("unset: %s, want Kafka's minimum 6s", got)
		}
	})
	if got := kafkaconf.HeartbeatInterval(3 * time.Second); got != time.Second {
		t.Errorf("heartbeat of a 3s session: %s, want 1s", got)
	}
}
