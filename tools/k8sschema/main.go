// Command k8sschema turns the Kubernetes OpenAPI v2 document (swagger.json,
// shipped in the k8s.io/kubernetes module under api/openapi-spec, which
// the Go module proxy serves) into the standalone, strict JSON schemas
// kubeconform reads, one file per kind named as kubeconform looks them up
// ({kind}-{group}-{version}.json). It is what lets `make deploy-check`
// validate manifests without the internet: kubeconform's default schema
// location is GitHub, which this machine cannot reach.
//
//	go run ./k8sschema -in swagger.json -out DIR
//	go run ./k8sschema -crd crd.yaml[,crd.yaml…] -out DIR
//
// With -crd it reads CustomResourceDefinitions instead (for instance the
// Prometheus Operator's, from its Go module) and writes the schema of
// each served version the same way, so a chart's ServiceMonitor and
// PrometheusRule are validated as strictly as its core kinds.
//
// Like openapi2jsonschema --expanded --kubernetes --stand-alone --strict:
// every $ref is inlined (a type that contains itself becomes {}), objects
// with properties refuse unknown ones, every type also admits null,
// IntOrString and Quantity admit a string or a number, and formats are
// dropped (kubeconform does not check them).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	in := flag.String("in", "", "the Kubernetes swagger.json")
	crds := flag.String("crd", "", "comma-separated CustomResourceDefinition YAML files (instead of -in)")
	out := flag.String("out", "", "directory to write the schemas to")
	flag.Parse()
	var err error
	if *crds != "" {
		err = runCRDs(strings.Split(*crds, ","), *out)
	} else {
		err = run(*in, *out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8sschema:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	if in == "" || out == "" {
		return errors.New("-in and -out are required")
	}
	b, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var doc struct {
		Definitions map[string]map[string]any `json:"definitions"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	n := 0
	for name, def := range doc.Definitions {
		for _, gvk := range kinds(def) {
			s := expand(def, doc.Definitions, map[string]bool{name: true})
			if err := write(filepath.Join(out, fileName(gvk)), s); err != nil {
				return err
			}
			n++
		}
	}
	fmt.Printf("k8sschema: %d schemas in %s\n", n, out)
	return nil
}

// gvk is a kind's group, version and name.
type gvk struct{ group, version, kind string }

// kinds returns the kinds a definition is the schema of.
func kinds(def map[string]any) []gvk {
	list, _ := def["x-kubernetes-group-version-kind"].([]any)
	var out []gvk
	for _, e := range list {
		m, _ := e.(map[string]any)
		g, _ := m["group"].(string)
		v, _ := m["version"].(string)
		k, _ := m["kind"].(string)
		out = append(out, gvk{g, v, k})
	}
	return out
}

// fileName is kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}.json.
func fileName(k gvk) string {
	suffix := "-" + k.version
	if k.group != "" {
		suffix = "-" + strings.ToLower(strings.Split(k.group, ".")[0]) + "-" + k.version
	}
	return strings.ToLower(k.kind) + suffix + ".json"
}

// special are the definitions whose string form stands for more.
var special = map[string]map[string]any{
	"io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}},
	"io.k8s.apimachinery.pkg.api.resource.Quantity":   {"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}},
}

// expand returns s with every $ref inlined; onPath are the definitions
// being expanded above it (a reference back to one becomes {}).
func expand(s map[string]any, defs map[string]map[string]any, onPath map[string]bool) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		name := strings.TrimPrefix(ref, "#/definitions/")
		if sp, ok := special[name]; ok {
			return sp
		}
		if onPath[name] || defs[name] == nil {
			return map[string]any{}
		}
		onPath[name] = true
		defer delete(onPath, name)
		return expand(defs[name], defs, onPath)
	}
	if s["x-kubernetes-int-or-string"] == true {
		return special["io.k8s.apimachinery.pkg.util.intstr.IntOrString"]
	}
	out := make(map[string]any, len(s)+1)
	for k, v := range s {
		switch k {
		case "format", "x-kubernetes-group-version-kind", "description":
			continue
		case "properties":
			props := map[string]any{}
			for pk, pv := range v.(map[string]any) {
				props[pk] = expand(pv.(map[string]any), defs, onPath)
			}
			out[k] = props
		case "items", "additionalProperties":
			if m, ok := v.(map[string]any); ok {
				out[k] = expand(m, defs, onPath)
			} else {
				out[k] = v
			}
		case "type":
			out[k] = []any{v, "null"}
		default:
			out[k] = v
		}
	}
	// A CRD's x-kubernetes-preserve-unknown-fields keeps an object open.
	if _, ok := out["properties"]; ok && s["x-kubernetes-preserve-unknown-fields"] != true {
		if _, set := out["additionalProperties"]; !set {
			out["additionalProperties"] = false
		}
	}
	return out
}

func write(path string, s map[string]any) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
