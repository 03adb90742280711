package service

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/eskv/eskv/internal/filewatch"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultCertPoll is how often a CertReloader reads its certificate and
// key files to see whether they changed.
const DefaultCertPoll = 5 * time.Second

// CertReloader serves a TLS certificate and key from two PEM files and
// keeps them in step with the files: it re-reads them on demand (SIGHUP)
// and when their content changes, and replaces the pair atomically; new
// connections get the new certificate, open ones keep theirs. A pair
// that does not load (unreadable, not PEM, a key that is not the
// certificate's, a certificate already expired) changes nothing: the
// pair loaded last stays in force, the reason is logged and
// eskv_tls_cert_reload_failures_total counts it.
//
// As TokenReloader does for the tokens file, it polls the files' SHA-256
// rather than watching them: a Kubernetes Secret volume (or
// cert-manager) replaces them through a symlink swap that watches on the
// files miss.
type CertReloader struct {
	certFile, keyFile string
	log               *slog.Logger
	cert              atomic.Pointer[tls.Certificate]
	sum               [32]byte // of the contents loaded (or refused) last
	now               func() time.Time

	notAfter prometheus.Gauge
	lastLoad prometheus.Gauge
	failures prometheus.Counter
}

// NewCertReloader loads the pair certFile, keyFile and registers its
// metrics on reg (when not nil). A pair that does not load is an error
// naming the files: the service must not start without its certificate.
func NewCertReloader(certFile, keyFile string, reg prometheus.Registerer, log *slog.Logger) (*CertReloader, error) {
	r := &CertReloader{certFile: certFile, keyFile: keyFile, log: log, now: time.Now,
		notAfter: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_tls_cert_not_after_timestamp_seconds", Help: "When the TLS certificate in force expires (Unix time).",
		}),
		lastLoad: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "eskv_tls_cert_last_load_timestamp_seconds", Help: "When the TLS certificate and key files were last loaded successfully (Unix time).",
		}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "eskv_tls_cert_reload_failures_total", Help: "Reloads of the TLS certificate and key files that failed; the pair loaded before stays in force (the log says why).",
		}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{r.notAfter, r.lastLoad, r.failures} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	c, sum, err := r.load()
	if err != nil {
		return nil, err
	}
	r.install(c, sum)
	return r, nil
}

// ServerConfig returns the server TLS configuration serving the pair in
// force: TLS 1.2 at least.
func (r *CertReloader) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
}

// GetCertificate returns the pair in force (tls.Config.GetCertificate).
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cert.Load(), nil
}

// contents reads both files and returns them and their SHA-256.
func (r *CertReloader) contents() (certPEM, keyPEM []byte, sum [32]byte, err error) {
	if certPEM, err = os.ReadFile(r.certFile); err != nil {
		return nil, nil, sum, fmt.Errorf("TLS certificate file: %w", err)
	}
	if keyPEM, err = os.ReadFile(r.keyFile); err != nil {
		return nil, nil, sum, fmt.Errorf("TLS key file: %w", err)
	}
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	h.Sum(sum[:0])
	return certPEM, keyPEM, sum, nil
}

// load reads and checks the pair; it returns it and the files' SHA-256
// (also when the pair is refused; zero when a file is unreadable).
func (r *CertReloader) load() (*tls.Certificate, [32]byte, error) {
	certPEM, keyPEM, sum, err := r.contents()
	if err != nil {
		return nil, sum, err
	}
	c, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, sum, fmt.Errorf("TLS certificate %s and key %s: %w", r.certFile, r.keyFile, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, sum, fmt.Errorf("TLS certificate %s: %w", r.certFile, err)
		}
	}
	if now := r.now(); now.After(c.Leaf.NotAfter) {
		return nil, sum, fmt.Errorf("TLS certificate %s expired at %s", r.certFile, c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return &c, sum, nil
}

// install puts c in force.
func (r *CertReloader) install(c *tls.Certificate, sum [32]byte) {
	r.cert.Store(c)
	r.sum = sum
	r.notAfter.Set(float64(c.Leaf.NotAfter.Unix()))
	r.lastLoad.SetToCurrentTime()
}

// Run reloads the pair on each value of reload (SIGHUP) and, every poll
// (DefaultCertPoll when 0), when the files' contents changed, until ctx
// ends. Contents that failed to load are not tried again until they
// change or a signal asks. Reload is called from Run's goroutine only.
func (r *CertReloader) Run(ctx context.Context, poll time.Duration, reload <-chan os.Signal) error {
	if poll <= 0 {
		poll = DefaultCertPoll
	}
	changed := func() bool { _, _, sum, _ := r.contents(); return sum != r.sum } // zero when unreadable
	return filewatch.Run(ctx, poll, reload, changed, func(why string) { r.Reload(why) })
}

// Reload loads the pair and puts it in force, or keeps the one in force
// and logs why not. why says what asked for it (signal, changed). It
// reports whether the new pair is in force.
func (r *CertReloader) Reload(why string) bool {
	c, sum, err := r.load()
	if err != nil {
		r.failures.Inc()
		r.log.Error("TLS certificate not reloaded: the certificate loaded before stays in force", "trigger", why, "err", err)
		r.sum = sum // a bad pair is reported once, not at every poll
		return false
	}
	r.install(c, sum)
	r.log.Info("TLS certificate reloaded", "trigger", why, "cert", r.certFile, "serial", c.Leaf.SerialNumber.String(),
		"notAfter", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return true
}
