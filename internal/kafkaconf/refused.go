package kafkaconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Refused reports whether err says the cluster refused this client's
// connection settings — TLS missing or not trusted, SASL missing, wrong
// credentials, an ACL denying it — rather than a transient failure.
// Retrying cannot help: the components stop at once with the error
// instead of retrying it forever.
func Refused(err error) bool {
	if err == nil {
		return false
	}
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		// kgo: the broker hung up at once (TLS or SASL missing).
		return true
	}
	if tlsRefused(err) {
		return true
	}
	for _, e := range []error{
		kerr.SaslAuthenticationFailed, kerr.UnsupportedSaslMechanism, kerr.IllegalSaslState,
		kerr.ClusterAuthorizationFailed, kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed,
		kerr.TransactionalIDAuthorizationFailed,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// tlsRefused reports a failed TLS handshake: a server certificate not
// trusted or not for this name, a plaintext server, or the server's
// alert (a client certificate missing or not trusted).
func tlsRefused(err error) bool {
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); ok {
		return true
	}
	if _, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		return true
	}
	if _, ok := errors.AsType[x509.HostnameError](err); ok {
		return true
	}
	if op, ok := errors.AsType[*net.OpError](err); ok && op.Op == "remote error" {
		return true // a TLS alert from the server
	}
	return false
}
