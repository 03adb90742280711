package kvcli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addCACertFlag adds --cacert: the CA of an https:// writer.
func (a *app) addCACertFlag(f *pflag.FlagSet) {
	f.StringVar(&a.cacert, "cacert", a.getenv("KVCTL_CACERT"),
		"PEM file of the CA that signed an https:// --url's certificate, trusted instead of the system's roots (KVCTL_CACERT)")
}

// transport is how requests are sent: with --cacert's roots (else a
// profile's cacert) trusted instead of the system's, else
// http.DefaultTransport.
func (a *app) transport(cmd *cobra.Command) (http.RoundTripper, error) {
	path, source := a.cacert, "--cacert"
	if a.prof != nil && a.prof.CACert != "" && !cmd.Flags().Changed("cacert") {
		path, source = a.prof.CACert, "profile "+a.prof.name+"'s cacert"
	}
	if path == "" {
		return http.DefaultTransport, nil
	}
	b, err := os.ReadFile(path)
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(b) {
		err = errors.New("it holds no PEM certificate")
	}
	if err != nil {
		return nil, &usageError{msg: fmt.Sprintf("%s %s: %v", source, path, err),
			solution: "give the PEM file of the CA that signed the writer's certificate (--cacert FILE or KVCTL_CACERT)", cmd: cmd.CommandPath()}
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	return t, nil
}
