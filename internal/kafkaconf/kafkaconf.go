// Package kafkaconf is the one place where eskv's Kafka clients are
// built: every component (writer, projector, auditor, their read
// commands, logcheck and the tools) asks a Conn for its clients, so TLS,
// SASL and the client metrics are the same everywhere.
package kafkaconf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/eskv/eskv/internal/secure"
)

// The SASL mechanisms, as ESKV_KAFKA_SASL_MECHANISM spells them.
const (
	Plain       = "plain"
	ScramSHA256 = "scram-sha-256"
	ScramSHA512 = "scram-sha-512"
)

// Name names a Kafka setting in errors: Name("tls-ca-file") is
// "-kafka-tls-ca-file (ESKV_KAFKA_TLS_CA_FILE)".
var Name = secure.Prefixed("kafka")

// Settings are the Kafka connection settings of a process, as read from
// its flags and environment.
type Settings struct {
	TLS secure.TLS
	// InsecureDev allows what is unsafe outside a developer's machine:
	// TLS without verifying the server, SASL PLAIN without TLS.
	InsecureDev bool
	// SASLMechanism is "" (no SASL), Plain, ScramSHA256 or ScramSHA512.
	SASLMechanism string
	SASLUsername  string
	// SASLPassword comes from ESKV_KAFKA_SASL_PASSWORD only; or
	// SASLPasswordFile names a file holding it, read again at every
	// authentication so that a rotated secret needs no restart.
	SASLPassword     string
	SASLPasswordFile string
}

// Conn returns the connection of these settings, or an error naming the
// setting at fault.
func (s Settings) Conn() (Conn, error) {
	tc, err := s.TLS.Config(Name, s.InsecureDev, Name("insecure-dev"))
	if err != nil {
		return Conn{}, err
	}
	mech, err := s.sasl(tc != nil)
	if err != nil {
		return Conn{}, err
	}
	return Conn{TLS: tc, SASL: mech}, nil
}

// sasl returns the SASL mechanism of the settings, nil for none.
func (s Settings) sasl(tlsOn bool) (sasl.Mechanism, error) {
	mech := strings.ToLower(s.SASLMechanism)
	if mech == "" {
		var set []string
		for name, v := range map[string]string{Name("sasl-username"): s.SASLUsername,
			"ESKV_KAFKA_SASL_PASSWORD": s.SASLPassword, Name("sasl-password-file"): s.SASLPasswordFile} {
			if v != "" {
				set = append(set, name)
			}
		}
		if len(set) > 0 {
			slices.Sort(set)
			return nil, fmt.Errorf("%s is set but %s is not: set it to %s, %s or %s",
				strings.Join(set, ", "), Name("sasl-mechanism"), Plain, ScramSHA256, ScramSHA512)
		}
		return nil, nil
	}
	if mech != Plain && mech != ScramSHA256 && mech != ScramSHA512 {
		return nil, fmt.Errorf("%s must be %s, %s or %s, got %q", Name("sasl-mechanism"), Plain, ScramSHA256, ScramSHA512, s.SASLMechanism)
	}
	if mech == Plain && !tlsOn && !s.InsecureDev {
		return nil, fmt.Errorf("%s=%s without TLS (%s) sends the password in clear text: refused without %s",
			Name("sasl-mechanism"), Plain, Name("tls"), Name("insecure-dev"))
	}
	if s.SASLUsername == "" {
		return nil, fmt.Errorf("%s is required with %s", Name("sasl-username"), Name("sasl-mechanism"))
	}
	password := s.password()
	if _, err := password(context.Background()); err != nil {
		return nil, err
	}
	user := s.SASLUsername
	switch mech {
	case Plain:
		return plain.Plain(func(ctx context.Context) (plain.Auth, error) {
			p, err := password(ctx)
			return plain.Auth{User: user, Pass: p}, err
		}), nil
	case ScramSHA256:
		return scram.Sha256(scramAuth(user, password)), nil
	default:
		return scram.Sha512(scramAuth(user, password)), nil
	}
}

// password returns the function that reads the SASL password at each
// authentication.
func (s Settings) password() func(context.Context) (string, error) {
	valueName := "ESKV_KAFKA_SASL_PASSWORD"
	return func(context.Context) (string, error) {
		p, err := secure.Secret(s.SASLPassword, s.SASLPasswordFile, valueName, Name("sasl-password-file"))
		if err == nil && p == "" {
			err = fmt.Errorf("%s (or %s) is required with %s", valueName, Name("sasl-password-file"), Name("sasl-mechanism"))
		}
		return p, err
	}
}

func scramAuth(user string, password func(context.Context) (string, error)) func(context.Context) (scram.Auth, error) {
	return func(ctx context.Context) (scram.Auth, error) {
		p, err := password(ctx)
		return scram.Auth{User: user, Pass: p}, err
	}
}

// Conn is how a process's clients reach the cluster beyond the seed
// brokers. The zero Conn is plaintext without authentication or metrics
// (the local stack and the tests).
type Conn struct {
	TLS  *tls.Config    // nil: plaintext
	SASL sasl.Mechanism // nil: no authentication
	// Metrics receives each client's kprom metrics, named
	// eskv_kafka_<role>_…; nil: none.
	Metrics prometheus.Registerer
}

// WithMetrics returns c whose clients register their metrics on reg,
// unless c has a registry already.
func (c Conn) WithMetrics(reg prometheus.Registerer) Conn {
	if c.Metrics == nil {
		c.Metrics = reg
	}
	return c
}

// Opts returns the options of a client in role (writer_group,
// projector, …): seed brokers, client id eskv-<role>, TLS, SASL and the
// metrics hooks. Options appended after them win (a more precise
// kgo.ClientID, which then labels the metrics too).
func (c Conn) Opts(role string, brokers []string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(brokers...), kgo.ClientID("eskv-" + strings.ReplaceAll(role, "_", "-"))}
	if c.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(c.TLS.Clone()))
	}
	if c.SASL != nil {
		opts = append(opts, kgo.SASL(c.SASL))
	}
	if c.Metrics != nil {
		m := kprom.NewMetrics("eskv_kafka", kprom.Subsystem(role), kprom.Registerer(lenient{c.Metrics}), kprom.WithClientLabel())
		opts = append(opts, kgo.WithHooks(m))
	}
	return opts
}

// NewClient returns a client in role for brokers with c's options, then
// opts.
func (c Conn) NewClient(role string, brokers []string, opts ...kgo.Opt) (*kgo.Client, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka: no seed brokers configured")
	}
	cl, err := kgo.NewClient(append(c.Opts(role, brokers), opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka %s client: %w", role, err)
	}
	return cl, nil
}

// lenient registers kprom's collectors without panicking on a duplicate:
// a client replaced under the same client id (a writer's producer for a
// partition it owns again) may register before the previous one's
// collectors are gone; its series then appear with the next client.
type lenient struct{ prometheus.Registerer }

func (l lenient) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = l.Register(c)
	}
}
