// Package secure turns TLS and secret settings (files named by ESKV_
// variables) into what the Kafka and ClickHouse clients take. Its errors
// name the setting at fault through a Namer, never a secret's value.
package secure

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
)

// Namer names a setting in errors from its short name ("tls-ca-file"),
// e.g. "-kafka-tls-ca-file (ESKV_KAFKA_TLS_CA_FILE)".
type Namer func(short string) string

// Prefixed returns the Namer of the settings -<prefix>-<short>, bound to
// ESKV_<PREFIX>_<SHORT>: how service.Flags binds them.
func Prefixed(prefix string) Namer {
	return func(short string) string {
		flag := prefix + "-" + short
		return "-" + flag + " (" + Variable(flag) + ")"
	}
}

// Variable is the ESKV_ variable of a flag name: -kafka-tls-ca-file is
// ESKV_KAFKA_TLS_CA_FILE.
func Variable(flag string) string {
	return "ESKV_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// TLS are the settings of a TLS connection. Setting any file or the
// server name turns TLS on.
type TLS struct {
	Enabled    bool
	CAFile     string // PEM roots; empty: the system's
	CertFile   string // PEM client certificate, with KeyFile (mutual TLS)
	KeyFile    string
	ServerName string // expected name in the server's certificate; empty: the host dialled
	// InsecureSkipVerify accepts any server certificate: only with
	// AllowInsecure, for a developer's machine.
	InsecureSkipVerify bool
}

// On reports whether these settings ask for TLS.
func (s TLS) On() bool {
	return s.Enabled || s.CAFile != "" || s.CertFile != "" || s.KeyFile != "" || s.ServerName != "" || s.InsecureSkipVerify
}

// Config returns the client TLS configuration, nil when TLS is off.
// allowInsecure permits InsecureSkipVerify; insecureName names the
// setting that does.
func (s TLS) Config(name Namer, allowInsecure bool, insecureName string) (*tls.Config, error) {
	if !s.On() {
		return nil, nil
	}
	if s.InsecureSkipVerify && !allowInsecure {
		return nil, fmt.Errorf("%s is refused without %s: it accepts any server's certificate, so anyone on the path can read and change the traffic",
			name("tls-insecure-skip-verify"), insecureName)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName, InsecureSkipVerify: s.InsecureSkipVerify}
	if s.CAFile != "" {
		pool, err := loadCA(s.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name("tls-ca-file"), err)
		}
		cfg.RootCAs = pool
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return nil, fmt.Errorf("%s and %s go together (mutual TLS): set both or neither", name("tls-cert-file"), name("tls-key-file"))
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%s, %s: %w", name("tls-cert-file"), name("tls-key-file"), err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// loadCA reads a PEM bundle of root certificates.
func loadCA(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// Secret returns a secret given either directly (from an environment
// variable, never a flag: command lines are visible to every user of
// the machine) or as a file holding it (a mounted Kubernetes secret);
// one trailing newline of the file is dropped. valueName and fileName
// name the two settings. Both set is an error.
func Secret(value, file, valueName, fileName string) (string, error) {
	if file == "" {
		return value, nil
	}
	if value != "" {
		return "", fmt.Errorf("%s and %s are both set: set one", valueName, fileName)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s: %w", fileName, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", fileName, file)
	}
	return s, nil
}
