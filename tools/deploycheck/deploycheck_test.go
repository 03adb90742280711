package deploycheck

import (
	"bytes"
	"errors"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const (
	chart     = "../../deploy/helm/eskv"
	rulesFile = "../../deploy/observability/alerts.yaml"
	extended  = chart + "/ci/extended-values.yaml"
)

// helm returns the helm binary, or skips the test when there is none.
func helm(t *testing.T) string {
	t.Helper()
	if h := os.Getenv("ESKV_HELM"); h != "" {
		if _, err := os.Stat(h); err != nil {
			t.Fatalf("ESKV_HELM: %v", err)
		}
		return h
	}
	h := filepath.Join(build.Default.GOPATH, "bin", "helm")
	if _, err := os.Stat(h); err != nil {
		t.Skip("no helm binary: make deploy-check installs it and runs these tests")
	}
	return h
}

// render returns the chart's objects rendered with the values files.
func render(t *testing.T, valueFiles ...string) []map[string]any {
	t.Helper()
	args := []string{"template", "eskv", chart}
	for _, f := range valueFiles {
		args = append(args, "-f", f)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(helm(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var objs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(out))
	for {
		var o map[string]any
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
		}
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// path walks nested maps.
func path(v any, keys ...string) any {
	for _, k := range keys {
		m, _ := v.(map[string]any)
		v = m[k]
	}
	return v
}

func list(v any) []map[string]any {
	l, _ := v.([]any)
	var out []map[string]any
	for _, e := range l {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func str(v any) string { s, _ := v.(string); return s }

// TestPrometheusRuleIsTheRulesFile: the chart's PrometheusRule holds the
// groups of deploy/observability/alerts.yaml, unchanged.
func TestPrometheusRuleIsTheRulesFile(t *testing.T) {
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, o := range render(t, extended) {
		if o["kind"] != "PrometheusRule" {
			continue
		}
		found = true
		if got, want := path(o, "spec", "groups"), rules["groups"]; !reflect.DeepEqual(got, want) {
			t.Errorf("the PrometheusRule's groups differ from %s:\n%v\n%v", rulesFile, got, want)
		}
	}
	if !found {
		t.Fatalf("%s renders no PrometheusRule", extended)
	}
}

// TestExtendedValuesReachEveryPod: the global extraEnv, extraVolumes and
// extraVolumeMounts reach every component's pod, a component's own after
// them and winning over a global entry of the same name (one entry per
// name); the pods run as the chart's ServiceAccount without its token.
func TestExtendedValuesReachEveryPod(t *testing.T) {
	n := 0
	for _, o := range render(t, extended) {
		if o["kind"] != "StatefulSet" {
			continue
		}
		n++
		name := str(path(o, "metadata", "name"))
		pod := path(o, "spec", "template", "spec")
		if sa := str(path(pod, "serviceAccountName")); sa != "eskv" {
			t.Errorf("%s: serviceAccountName %q, want eskv", name, sa)
		}
		if auto := path(pod, "automountServiceAccountToken"); auto != false {
			t.Errorf("%s: automountServiceAccountToken %v, want false", name, auto)
		}
		if !slices.ContainsFunc(list(path(pod, "volumes")), func(v map[string]any) bool { return v["name"] == "ca-bundle" }) {
			t.Errorf("%s: no ca-bundle volume", name)
		}
		c := list(path(pod, "containers"))[0]
		if !slices.ContainsFunc(list(c["volumeMounts"]), func(m map[string]any) bool { return m["name"] == "ca-bundle" }) {
			t.Errorf("%s: no ca-bundle mount", name)
		}
		var env []string
		names := map[string]bool{}
		for _, e := range list(c["env"]) {
			env = append(env, str(e["name"])+"="+str(e["value"]))
			if names[str(e["name"])] {
				t.Errorf("%s: %s twice in the environment", name, e["name"])
			}
			names[str(e["name"])] = true
		}
		if !slices.Contains(env, "ESKV_CREATE_TOPICS=false") {
			t.Errorf("%s: no ESKV_CREATE_TOPICS=false in %v", name, env)
		}
		level := "ESKV_LOG_LEVEL=warn"
		if name == "eskv-writer" {
			level = "ESKV_LOG_LEVEL=debug"
			if env[len(env)-1] != "ESKV_METRICS_TOKEN=" {
				t.Errorf("%s: the writer's own extraEnv is not last: %v", name, env)
			}
		}
		if !slices.Contains(env, level) {
			t.Errorf("%s: no %s (the component's extraEnv over the global one) in %v", name, level, env)
		}
	}
	if n != 3 {
		t.Fatalf("%d StatefulSets, want 3", n)
	}
}
