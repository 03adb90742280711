package deploycheck

import (
	"slices"
	"testing"
)

const writerTLS = chart + "/ci/writer-tls-values.yaml"

// writerPod returns the writer StatefulSet's pod spec and its container.
func writerPod(t *testing.T, objs []map[string]any) (pod any, container map[string]any) {
	t.Helper()
	for _, o := range objs {
		if o["kind"] == "StatefulSet" && str(path(o, "metadata", "name")) == "eskv-writer" {
			pod = path(o, "spec", "template", "spec")
			return pod, list(path(pod, "containers"))[0]
		}
	}
	t.Fatal("no eskv-writer StatefulSet")
	return nil, nil
}

// envValues returns the container's env entries by name (value, or "" for a valueFrom).
func envValues(c map[string]any) map[string]string {
	env := map[string]string{}
	for _, e := range list(c["env"]) {
		env[str(e["name"])] = str(e["value"])
	}
	return env
}

func probeSchemes(c map[string]any) []string {
	var schemes []string
	for _, p := range []string{"readinessProbe", "livenessProbe", "startupProbe"} {
		schemes = append(schemes, str(path(c, p, "httpGet", "scheme")))
	}
	return schemes
}

// TestWriterTLS: with writer.tls.enabled the writers get the certificate's
// Secret mounted as a directory, the three ESKV_TLS_* files in it, an
// https advertise URL at their headless Service DNS name (which the
// headless Service publishes before they are ready), HTTPS probes, and
// the ServiceMonitor scrapes them over HTTPS; the default rendering has
// none of it.
func TestWriterTLS(t *testing.T) {
	tlsEnv := []string{"ESKV_TLS_CERT_FILE", "ESKV_TLS_KEY_FILE", "ESKV_TLS_CA_FILE"}

	t.Run("enabled serves and forwards over https", func(t *testing.T) {
		objs := render(t, writerTLS)
		pod, c := writerPod(t, objs)
		env := envValues(c)
		want := map[string]string{
			"ESKV_TLS_CERT_FILE": "/etc/eskv/tls/tls.crt",
			"ESKV_TLS_KEY_FILE":  "/etc/eskv/tls/tls.key",
			"ESKV_TLS_CA_FILE":   "/etc/eskv/tls/ca.crt",
			"ESKV_ADVERTISE_URL": "https://$(ESKV_WRITER_ID).eskv-writer-headless.$(POD_NAMESPACE).svc:8080",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s=%q, want %q", k, env[k], v)
			}
		}
		if _, ok := env["POD_NAMESPACE"]; !ok {
			t.Error("no POD_NAMESPACE, which the advertise URL names")
		}
		if !slices.ContainsFunc(list(c["volumeMounts"]), func(m map[string]any) bool {
			return m["name"] == "tls" && m["mountPath"] == "/etc/eskv/tls" && m["subPath"] == nil
		}) {
			t.Errorf("no tls directory mount on /etc/eskv/tls: %v", c["volumeMounts"])
		}
		if !slices.ContainsFunc(list(path(pod, "volumes")), func(v map[string]any) bool {
			return v["name"] == "tls" && str(path(v, "secret", "secretName")) == "eskv-writer-tls"
		}) {
			t.Errorf("no tls volume of the Secret eskv-writer-tls: %v", path(pod, "volumes"))
		}
		if got := probeSchemes(c); !slices.Equal(got, []string{"HTTPS", "HTTPS", "HTTPS"}) {
			t.Errorf("probe schemes %v, want HTTPS for each", got)
		}
		for _, o := range objs {
			switch {
			case o["kind"] == "Service" && str(path(o, "metadata", "name")) == "eskv-writer-headless":
				if path(o, "spec", "publishNotReadyAddresses") != true {
					t.Error("the writers' headless Service does not publish not-ready pods: a catching-up writer's name would not resolve")
				}
				if port := list(path(o, "spec", "ports"))[0]; port["name"] != "https" {
					t.Errorf("the writers' headless Service's port is %v, want https", port["name"])
				}
			case o["kind"] == "ServiceMonitor":
				if !slices.ContainsFunc(list(path(o, "spec", "endpoints")), func(e map[string]any) bool {
					return e["port"] == "https" && e["scheme"] == "https"
				}) {
					t.Errorf("the ServiceMonitor does not scrape the https port over https: %v", path(o, "spec", "endpoints"))
				}
			}
		}
	})

	t.Run("default has none of it", func(t *testing.T) {
		_, c := writerPod(t, render(t))
		env := envValues(c)
		for _, k := range tlsEnv {
			if _, ok := env[k]; ok {
				t.Errorf("%s set by default", k)
			}
		}
		if got := env["ESKV_ADVERTISE_URL"]; got != "http://$(POD_IP):8080" {
			t.Errorf("ESKV_ADVERTISE_URL=%q, want http://$(POD_IP):8080", got)
		}
		if slices.ContainsFunc(list(c["volumeMounts"]), func(m map[string]any) bool { return m["name"] == "tls" }) {
			t.Error("a tls mount by default")
		}
		if got := probeSchemes(c); !slices.Equal(got, []string{"", "", ""}) {
			t.Errorf("probe schemes %v, want the default (HTTP)", got)
		}
	})
}
