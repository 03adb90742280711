package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

// crd is the part of a CustomResourceDefinition a schema is made of.
type crd struct {
	Kind string `yaml:"kind"`
	Spec struct {
		Group string `yaml:"group"`
		Names struct {
			Kind string `yaml:"kind"`
		} `yaml:"names"`
		Versions []struct {
			Name   string `yaml:"name"`
			Served bool   `yaml:"served"`
			Schema struct {
				OpenAPIV3Schema map[string]any `yaml:"openAPIV3Schema"`
			} `yaml:"schema"`
		} `yaml:"versions"`
	} `yaml:"spec"`
}

// runCRDs writes the schema of every served version of the
// CustomResourceDefinitions in files into out.
func runCRDs(files []string, out string) error {
	if len(files) == 0 || out == "" {
		return errors.New("-crd and -out are required")
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var c crd
		if err := yaml.Unmarshal(b, &c); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if c.Kind != "CustomResourceDefinition" || c.Spec.Group == "" || c.Spec.Names.Kind == "" {
			return fmt.Errorf("%s: not a CustomResourceDefinition", f)
		}
		for _, v := range c.Spec.Versions {
			if !v.Served || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			s := expand(v.Schema.OpenAPIV3Schema, nil, map[string]bool{})
			if err := write(filepath.Join(out, fileName(gvk{c.Spec.Group, v.Name, c.Spec.Names.Kind})), s); err != nil {
				return err
			}
			n++
		}
	}
	if n == 0 {
		return errors.New("no served version with a schema in the CRDs")
	}
	fmt.Printf("k8sschema: %d CRD schemas in %s\n", n, out)
	return nil
}
