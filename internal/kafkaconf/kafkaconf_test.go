package kafkaconf_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/secure"
	"github.com/eskv/eskv/testenv"
)

// TestSettings_RefusedNamingTheSetting: every bad combination of
// settings is refused by an error naming the variable at fault, and no
// error ever carries the password.
func TestSettings_RefusedNamingTheSetting(t *testing.T) {
	pki := testenv.MustPKI(t)
	const password = "p4ssw0rd-never-shown"
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tlsOn := secure.TLS{Enabled: true, CAFile: pki.CAFile}
	for _, tc := range []struct {
		name string
		s    kafkaconf.Settings
		want []string
	}{
		{"UnknownMechanism", kafkaconf.Settings{TLS: tlsOn, SASLMechanism: "gssapi", SASLUsername: "u", SASLPassword: password},
			[]string{"ESKV_KAFKA_SASL_MECHANISM", "gssapi"}},
		{"PlainWithoutTLS", kafkaconf.Settings{SASLMechanism: "plain", SASLUsername: "u", SASLPassword: password},
			[]string{"ESKV_KAFKA_SASL_MECHANISM", "ESKV_KAFKA_TLS", "ESKV_KAFKA_INSECURE_DEV"}},
		{"NoUsername", kafkaconf.Settings{TLS: tlsOn, SASLMechanism: "scram-sha-256", SASLPassword: password},
			[]string{"ESKV_KAFKA_SASL_USERNAME"}},
		{"NoPassword", kafkaconf.Settings{TLS: tlsOn, SASLMechanism: "scram-sha-512", SASLUsername: "u"},
			[]string{"ESKV_KAFKA_SASL_PASSWORD", "ESKV_KAFKA_SASL_PASSWORD_FILE"}},
		{"PasswordTwice", kafkaconf.Settings{TLS: tlsOn, SASLMechanism: "scram-sha-512", SASLUsername: "u", SASLPassword: password, SASLPasswordFile: empty},
			[]string{"ESKV_KAFKA_SASL_PASSWORD", "ESKV_KAFKA_SASL_PASSWORD_FILE", "both"}},
		{"PasswordFileEmpty", kafkaconf.Settings{TLS: tlsOn, SASLMechanism: "scram-sha-512", SASLUsername: "u", SASLPasswordFile: empty},
			[]string{"ESKV_KAFKA_SASL_PASSWORD_FILE", "empty"}},
		{"PasswordFileMissing", kafkaconf.Settings{TLS: tlsOn, SASLMechanism: "scram-sha-512", SASLUsername: "u", SASLPasswordFile: empty + ".missing"},
			[]string{"ESKV_KAFKA_SASL_PASSWORD_FILE", "no such file"}},
		{"CredentialsWithoutMechanism", kafkaconf.Settings{SASLUsername: "u", SASLPassword: password},
			[]string{"ESKV_KAFKA_SASL_MECHANISM"}},
		{"SkipVerifyWithoutDev", kafkaconf.Settings{TLS: secure.TLS{InsecureSkipVerify: true}},
			[]string{"ESKV_KAFKA_TLS_INSECURE_SKIP_VERIFY", "ESKV_KAFKA_INSECURE_DEV"}},
		{"CertWithoutKey", kafkaconf.Settings{TLS: secure.TLS{CertFile: pki.ClientCertFile}},
			[]string{"ESKV_KAFKA_TLS_CERT_FILE", "ESKV_KAFKA_TLS_KEY_FILE"}},
		{"CAMissing", kafkaconf.Settings{TLS: secure.TLS{CAFile: empty + ".missing"}},
			[]string{"ESKV_KAFKA_TLS_CA_FILE"}},
		{"CANotPEM", kafkaconf.Settings{TLS: secure.TLS{CAFile: empty}},
			[]string{"ESKV_KAFKA_TLS_CA_FILE", "no PEM certificate"}},
		{"KeyNotMatchingCert", kafkaconf.Settings{TLS: secure.TLS{CertFile: pki.ClientCertFile, KeyFile: pki.ServerKeyFile}},
			[]string{"ESKV_KAFKA_TLS_CERT_FILE", "ESKV_KAFKA_TLS_KEY_FILE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.s.Conn()
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// TestSettings_Accepted: the secure settings build a connection; the dev
// setting allows skip-verify and PLAIN without TLS; no settings is
// plaintext.
func TestSettings_Accepted(t *testing.T) {
	pki := testenv.MustPKI(t)
	for name, s := range map[string]kafkaconf.Settings{
		"Plaintext":     {},
		"TLSSystemCAs":  {TLS: secure.TLS{Enabled: true}},
		"MutualTLS":     {TLS: secure.TLS{CAFile: pki.CAFile, CertFile: pki.ClientCertFile, KeyFile: pki.ClientKeyFile, ServerName: "kafka.example"}},
		"DevSkipVerify": {TLS: secure.TLS{InsecureSkipVerify: true}, InsecureDev: true},
		"DevPlain":      {SASLMechanism: "PLAIN", SASLUsername: "u", SASLPassword: "p", InsecureDev: true},
		"ScramNoTLS":    {SASLMechanism: "scram-sha-256", SASLUsername: "u", SASLPassword: "p"},
	} {
		conn, err := s.Conn()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if (conn.TLS != nil) != s.TLS.On() || (conn.SASL != nil) != (s.SASLMechanism != "") {
			t.Errorf("%s: TLS %v SASL %v", name, conn.TLS != nil, conn.SASL)
		}
	}
}

// TestRefused: the brokers' refusals are told apart from transient
// errors.
func TestRefused(t *testing.T) {
	for _, err := range []error{kerr.SaslAuthenticationFailed, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed} {
		if !kafkaconf.Refused(fmt.Errorf("describe: %w", err)) {
			t.Errorf("%v not a refusal", err)
		}
	}
	for _, err := range []error{nil, errors.New("EOF"), context.DeadlineExceeded, kerr.NotCoordinator, kerr.UnknownTopicOrPartition} {
		if kafkaconf.Refused(err) {
			t.Errorf("%v taken for a refusal", err)
		}
	}
}

// TestConn_EachMechanismAgainstSecuredBroker: PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512 (the last with its password in a file, re-read at each
// authentication) reach a broker that requires TLS and SASL; a wrong
// password, an untrusted CA or a wrong server name do not. Each client
// registers its kprom metrics under its role.
func TestConn_EachMechanismAgainstSecuredBroker(t *testing.T) {
	sb := testenv.MustSecureBroker(t, 1, false)
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(testenv.SecurePassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	good := map[string]kafkaconf.Settings{}
	good["plain"] = sb.Settings
	s := sb.Settings
	s.SASLMechanism, s.SASLUsername = kafkaconf.ScramSHA256, testenv.SecureScram256
	good["scram_sha_256"] = s
	s.SASLMechanism, s.SASLUsername, s.SASLPassword, s.SASLPasswordFile = kafkaconf.ScramSHA512, testenv.SecureScram512, "", pwFile
	good["scram_sha_512"] = s
	for role, s := range good {
		conn, err := s.Conn()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := conn.WithMetrics(reg).NewClient(role, sb.Addrs)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close() // which unregisters its metrics
		if err := listTopicsWith(cl); err != nil {
			t.Errorf("%s: %v", role, err)
		}
	}
	names := metricNames(t, reg)
	for role := range good {
		if !strings.Contains(names, "eskv_kafka_"+role+"_connects_total") {
			t.Errorf("no eskv_kafka_%s_connects_total among %s", role, names)
		}
	}

	wrongPassword, wrongCA, wrongName := sb.Settings, sb.Settings, sb.Settings
	wrongPassword.SASLPassword = "not-the-password"
	wrongCA.TLS.CAFile = sb.PKI.OtherCAFile
	wrongName.TLS.ServerName = "other.eskv.test"
	for name, s := range map[string]kafkaconf.Settings{"wrong password": wrongPassword, "untrusted CA": wrongCA, "wrong server name": wrongName} {
		conn, err := s.Conn()
		if err != nil {
			t.Fatal(err)
		}
		if err := listTopics(conn, "refused", sb.Addrs); err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: got %v, want the broker's refusal", name, err)
		}
	}
}

// listTopics lists the topics with a client of conn.
func listTopics(conn kafkaconf.Conn, role string, brokers []string) error {
	cl, err := conn.NewClient(role, brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	return listTopicsWith(cl)
}

func listTopicsWith(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := kadm.NewClient(cl).ListTopics(ctx)
	return err
}

func metricNames(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	return strings.Join(names, " ")
}
