package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestSchemas: a kind's schema is written under kubeconform's file name,
// standalone (references inlined, a self-reference cut to {}), strict
// (unknown properties refused), nullable, with IntOrString as a string or
// an integer and without formats.
func TestSchemas(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "swagger.json")
	doc := `{"definitions": {
	  "io.k8s.api.policy.v1.PodDisruptionBudget": {
	    "x-kubernetes-group-version-kind": [{"group": "policy", "kind": "PodDisruptionBudget", "version": "v1"}],
	    "type": "object",
	    "properties": {"spec": {"$ref": "#/definitions/spec"}, "self": {"$ref": "#/definitions/io.k8s.api.policy.v1.PodDisruptionBudget"}}
	  },
	  "spec": {"type": "object", "properties": {
	    "maxUnavailable": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.util.intstr.IntOrString"},
	    "n": {"type": "integer", "format": "int32"}}},
	  "io.k8s.api.core.v1.ConfigMap": {
	    "x-kubernetes-group-version-kind": [{"group": "", "kind": "ConfigMap", "version": "v1"}],
	    "type": "object", "additionalProperties": {"type": "string"}}
	}}`
	if err := os.WriteFile(in, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := run(in, out); err != nil {
		t.Fatal(err)
	}
	var pdb map[string]any
	b, err := os.ReadFile(filepath.Join(out, "poddisruptionbudget-policy-v1.json"))
	if err != nil || json.Unmarshal(b, &pdb) != nil {
		t.Fatalf("read the PDB schema: %v", err)
	}
	want := map[string]any{
		"type":                 []any{"object", "null"},
		"additionalProperties": false,
		"properties": map[string]any{
			"self": map[string]any{},
			"spec": map[string]any{
				"type":                 []any{"object", "null"},
				"additionalProperties": false,
				"properties": map[string]any{
					"maxUnavailable": map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}},
					"n":              map[string]any{"type": []any{"integer", "null"}},
				},
			},
		},
	}
	if !reflect.DeepEqual(pdb, want) {
		got, _ := json.MarshalIndent(pdb, "", "  ")
		t.Errorf("PDB schema:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(out, "configmap-v1.json")); err != nil {
		t.Errorf("core kind: %v", err)
	}
}

// TestCRDSchemas: a CRD's served version becomes a schema under
// kubeconform's file name, strict except where the CRD preserves unknown
// fields, with x-kubernetes-int-or-string as a string or an integer; a
// version not served is left out.
func TestCRDSchemas(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "crd.yaml")
	doc := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
spec:
  group: monitoring.coreos.com
  names: {kind: ServiceMonitor}
  versions:
    - name: v1
      served: true
      schema:
        openAPIV3Schema:
          type: object
          description: dropped
          properties:
            spec:
              type: object
              properties:
                port: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
                free: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: string}}}
    - name: v1alpha1
      served: false
      schema:
        openAPIV3Schema: {type: object}
`
	if err := os.WriteFile(in, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	if err := runCRDs([]string{in}, out); err != nil {
		t.Fatal(err)
	}
	var sm map[string]any
	b, err := os.ReadFile(filepath.Join(out, "servicemonitor-monitoring-v1.json"))
	if err != nil || json.Unmarshal(b, &sm) != nil {
		t.Fatalf("read the ServiceMonitor schema: %v", err)
	}
	want := map[string]any{
		"type":                 []any{"object", "null"},
		"additionalProperties": false,
		"properties": map[string]any{
			"spec": map[string]any{
				"type":                 []any{"object", "null"},
				"additionalProperties": false,
				"properties": map[string]any{
					"port": map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}},
					"free": map[string]any{
						"type":                                 []any{"object", "null"},
						"x-kubernetes-preserve-unknown-fields": true,
						"properties":                           map[string]any{"a": map[string]any{"type": []any{"string", "null"}}},
					},
				},
			},
		},
	}
	if !reflect.DeepEqual(sm, want) {
		got, _ := json.MarshalIndent(sm, "", "  ")
		t.Errorf("ServiceMonitor schema:\n%s", got)
	}
	if _, err := os.Stat(filepath.Join(out, "servicemonitor-monitoring-v1alpha1.json")); err == nil {
		t.Error("a version not served has a schema")
	}
}
