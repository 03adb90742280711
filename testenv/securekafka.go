package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/eskv/eskv/changelog"
	"github.com/eskv/eskv/internal/kafkaconf"
	"github.com/eskv/eskv/internal/secure"
)

// The users of a SecureBroker: one per SASL mechanism, all superusers.
const (
	SecurePlainUser  = "plain-user"
	SecureScram256   = "scram256-user"
	SecureScram512   = "scram512-user"
	SecurePassword   = "s3cret-test-password"
	secureServerName = "kafka.eskv.test"
)

// SecureBroker is a kfake broker that requires TLS (with a client
// certificate when asked) and SASL: a client without them is refused.
type SecureBroker struct {
	*Broker
	PKI *PKI
	// Settings reach the broker as SecurePlainUser over TLS, verifying
	// its certificate against PKI.CAFile; change SASL* for the other users.
	Settings kafkaconf.Settings
}

// MustSecureBroker starts a single-node kfake cluster that speaks only
// TLS, with a certificate for kafka.eskv.test signed by a throwaway CA,
// and requires SASL: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 users (the
// Secure* constants). With mutualTLS it also requires a client
// certificate signed by the CA. It creates the eskv topics.
func MustSecureBroker(tb testing.TB, partitions int32, mutualTLS bool) *SecureBroker {
	tb.Helper()
	pki := MustPKI(tb)
	serverTLS := &tls.Config{Certificates: []tls.Certificate{pki.Server}, MinVersion: tls.VersionTLS12}
	if mutualTLS {
		serverTLS.ClientAuth = tls.RequireAndVerifyClientCert
		serverTLS.ClientCAs = pki.Pool
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.TLS(serverTLS), kfake.EnableSASL(),
		kfake.Superuser("PLAIN", SecurePlainUser, SecurePassword),
		kfake.Superuser("SCRAM-SHA-256", SecureScram256, SecurePassword),
		kfake.Superuser("SCRAM-SHA-512", SecureScram512, SecurePassword))
	if err != nil {
		tb.Fatalf("start kfake: %v", err)
	}
	tb.Cleanup(c.Close)
	sb := &SecureBroker{
		Broker: &Broker{Cluster: c, Addrs: c.ListenAddrs(), Topics: changelog.Topics{
			Changes: changelog.DefaultChangesTopic, Conflicts: changelog.DefaultConflictsTopic, Partitions: partitions,
		}},
		PKI: pki,
		Settings: kafkaconf.Settings{
			TLS:           secure.TLS{Enabled: true, CAFile: pki.CAFile, ServerName: secureServerName},
			SASLMechanism: kafkaconf.Plain, SASLUsername: SecurePlainUser, SASLPassword: SecurePassword,
		},
	}
	if mutualTLS {
		sb.Settings.TLS.CertFile, sb.Settings.TLS.KeyFile = pki.ClientCertFile, pki.ClientKeyFile
	}
	conn, err := sb.Settings.Conn()
	if err != nil {
		tb.Fatalf("secure broker settings: %v", err)
	}
	sb.Kafka = conn
	cl, err := conn.NewClient("testenv", sb.Addrs)
	if err != nil {
		tb.Fatalf("kafka client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := changelog.Ensure(ctx, kadm.NewClient(cl), sb.Topics); err != nil {
		tb.Fatalf("create topics: %v", err)
	}
	return sb
}

// PKI is a throwaway certificate authority with a server certificate
// for kafka.eskv.test (and 127.0.0.1) and a client certificate, written
// as PEM files in a test directory.
type PKI struct {
	Pool                          *x509.CertPool
	Server                        tls.Certificate
	CAFile                        string
	ServerCertFile, ServerKeyFile string
	ClientCertFile, ClientKeyFile string
	// OtherCAFile is another CA's certificate, which signed nothing here.
	OtherCAFile string
	ca          signer
}

// MustPKI generates the CA, the server and the client certificates.
func MustPKI(tb testing.TB) *PKI {
	tb.Helper()
	dir := tb.TempDir()
	ca, caKey := mustCA(tb, "eskv test CA")
	other, _ := mustCA(tb, "some other CA")
	p := &PKI{Pool: x509.NewCertPool(), CAFile: filepath.Join(dir, "ca.pem"), OtherCAFile: filepath.Join(dir, "other-ca.pem"), ca: signer{ca, caKey}}
	p.Pool.AddCert(ca)
	writePEM(tb, p.CAFile, "CERTIFICATE", ca.Raw)
	writePEM(tb, p.OtherCAFile, "CERTIFICATE", other.Raw)
	server := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: secureServerName},
		DNSNames: []string{secureServerName}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	p.ServerCertFile, p.ServerKeyFile = mustLeaf(tb, dir, "server", server, signer{ca, caKey})
	client := &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "eskv-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	p.ClientCertFile, p.ClientKeyFile = mustLeaf(tb, dir, "client", client, signer{ca, caKey})
	var err error
	if p.Server, err = tls.LoadX509KeyPair(p.ServerCertFile, p.ServerKeyFile); err != nil {
		tb.Fatalf("server key pair: %v", err)
	}
	return p
}

// MustServerCert signs a server certificate for 127.0.0.1, ::1 and
// localhost with serial number serial, and writes it and its key as
// <name>.pem and <name>-key.pem in dir.
func (p *PKI) MustServerCert(tb testing.TB, dir, name string, serial int64) (certFile, keyFile string) {
	tb.Helper()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return mustLeaf(tb, dir, name, tmpl, p.ca)
}

func mustCA(tb testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tb.Helper()
	key := mustKey(tb)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatalf("CA certificate: %v", err)
	}
	return cert, key
}

// signer is a CA's certificate and key.
type signer struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// mustLeaf signs tmpl with ca and writes <name>.pem and <name>-key.pem.
func mustLeaf(tb testing.TB, dir, name string, tmpl *x509.Certificate, ca signer) (certFile, keyFile string) {
	tb.Helper()
	key := mustKey(tb)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatalf("%s certificate: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatalf("%s key: %v", name, err)
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	writePEM(tb, certFile, "CERTIFICATE", der)
	writePEM(tb, keyFile, "PRIVATE KEY", keyDER)
	return certFile, keyFile
}

func mustKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("key: %v", err)
	}
	return key
}

func writePEM(tb testing.TB, path, kind string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("write %s: %v", path, err)
	}
}
