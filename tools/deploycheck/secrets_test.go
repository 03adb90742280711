package deploycheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const deployDocs = "../../docs/deploy.md"

// secretDocs are the files that show the kubectl create secret commands
// of a deployment; each must name every key of every Secret it creates
// that a pod of the default rendering mounts. deploy.md must also name
// those of the ci/ renderings.
var secretDocs = []string{deployDocs, "../../docs/operations.md", "../../deploy/k8s/secret.yaml"}

// mountedSecretKeys returns "secret/key" of every Secret key a pod of
// objs reads: env secretKeyRefs, secret volumes' items, and, for a
// secret volume mounted whole, the files under its mount path that the
// container's environment names.
func mountedSecretKeys(objs []map[string]any) []string {
	keys := map[string]bool{}
	for _, o := range objs {
		if o["kind"] != "StatefulSet" {
			continue
		}
		pod := path(o, "spec", "template", "spec")
		whole := map[string]string{} // volume -> secret mounted whole
		for _, v := range list(path(pod, "volumes")) {
			name := str(path(v, "secret", "secretName"))
			if name == "" {
				continue
			}
			items := list(path(v, "secret", "items"))
			for _, it := range items {
				keys[name+"/"+str(it["key"])] = true
			}
			if len(items) == 0 {
				whole[str(v["name"])] = name
			}
		}
		for _, c := range list(path(pod, "containers")) {
			for _, e := range list(c["env"]) {
				if ref := path(e, "valueFrom", "secretKeyRef"); ref != nil {
					keys[str(path(ref, "name"))+"/"+str(path(ref, "key"))] = true
				}
			}
			for _, m := range list(c["volumeMounts"]) {
				secret, ok := whole[str(m["name"])]
				if !ok {
					continue
				}
				for _, e := range list(c["env"]) {
					if file, ok := strings.CutPrefix(str(e["value"]), str(m["mountPath"])+"/"); ok {
						keys[secret+"/"+file] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// documentedSecretKeys returns "secret/key" of every key the kubectl
// create secret generic commands of a file create (--from-literal=K=V,
// --from-file=K=PATH, --from-file=PATH as its base name), the commands
// in Markdown blocks or in YAML comments, continued with backslashes.
func documentedSecretKeys(t *testing.T, file string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	cur := ""
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "#"))
		if cur == "" && !strings.HasPrefix(line, "kubectl create secret generic ") {
			continue
		}
		cont := strings.HasSuffix(line, `\`)
		cur += " " + strings.TrimSuffix(line, `\`)
		if !cont {
			cmds = append(cmds, cur)
			cur = ""
		}
	}
	keys := map[string]bool{}
	for _, c := range cmds {
		f := strings.Fields(c)
		if len(f) < 5 {
			continue
		}
		secret := f[4]
		for _, arg := range f[5:] {
			switch {
			case strings.HasPrefix(arg, "--from-literal="):
				k, _, _ := strings.Cut(strings.TrimPrefix(arg, "--from-literal="), "=")
				keys[secret+"/"+k] = true
			case strings.HasPrefix(arg, "--from-file="):
				v := strings.TrimPrefix(arg, "--from-file=")
				if k, _, ok := strings.Cut(v, "="); ok {
					keys[secret+"/"+k] = true
				} else {
					keys[secret+"/"+filepath.Base(v)] = true
				}
			}
		}
	}
	if len(keys) == 0 {
		t.Fatalf("%s: no kubectl create secret generic command", file)
	}
	return keys
}

// TestSecretDocsNameEveryMountedKey: the kubectl create secret commands
// of the docs create every Secret key a pod mounts (so a pod never waits
// on a key the docs did not say to create, as writers did on ui-key):
// every file for the default rendering's Secrets it creates, and
// docs/deploy.md for those of every ci/ values file too.
func TestSecretDocsNameEveryMountedKey(t *testing.T) {
	defaults := mountedSecretKeys(render(t))
	if !slices.Contains(defaults, "eskv/ui-key") {
		t.Fatalf("the default rendering mounts %v: no eskv/ui-key, the reading is wrong", defaults)
	}
	for _, doc := range secretDocs {
		documented := documentedSecretKeys(t, doc)
		for _, k := range defaults {
			if !documented[k] {
				t.Errorf("%s: a pod mounts %s, which its kubectl create secret commands do not create", doc, k)
			}
		}
	}
	ci, err := filepath.Glob(chart + "/ci/*.yaml")
	if err != nil || len(ci) == 0 {
		t.Fatalf("no ci values files: %v", err)
	}
	documented := documentedSecretKeys(t, deployDocs)
	for _, f := range ci {
		for _, k := range mountedSecretKeys(render(t, f)) {
			if !documented[k] {
				t.Errorf("%s: with %s a pod mounts %s, which its kubectl create secret commands do not create", deployDocs, filepath.Base(f), k)
			}
		}
	}
}
