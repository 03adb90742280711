package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fakeCommand builds a static binary of this machine's architecture that
// answers --version as the commands do, for images of "writer".
func fakeCommand(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(`package main

import "fmt"

func main() { fmt.Println("writer v0.2.0 (revision abc123, go)") }
`), 0o644); err != nil {
		tb.Fatal(err)
	}
	bin := filepath.Join(dir, "writer")
	cmd := exec.Command("go", "build", "-o", bin, src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestImageRoundTrip: an archive release image writes passes release
// verify (config user, entrypoint, labels, digests against the index, the
// files, the binary's --version), and the same inputs give the same
// index digest; an image that verify must refuse (root user, wrong
// version, missing architecture, a dynamically linked binary's stand-in)
// is refused naming what is wrong.
func TestImageRoundTrip(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs a linux binary")
	}
	bin := fakeCommand(t)
	spec := imageSpec{name: "writer", version: "v0.2.0", revision: "abc123", source: "https://github.com/eskv/eskv",
		created: time.Unix(1700000000, 0), caCerts: []byte("-----BEGIN CERTIFICATE-----\n"),
		binaries: map[string]string{runtime.GOARCH: bin}, user: user}
	good := want{name: "writer", version: "v0.2.0", revision: "abc123", platforms: []string{runtime.GOARCH}}
	write := func(t *testing.T, s imageSpec) string {
		t.Helper()
		idx, err := s.index()
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), "writer.oci.tar")
		if err := writeArchive(p, tag(s.version), idx, s.created); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("OKVerified", func(t *testing.T) {
		if err := verifyArchive(write(t, spec), good); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("OKReproducible", func(t *testing.T) {
		a, err := spec.index()
		if err != nil {
			t.Fatal(err)
		}
		b, err := spec.index()
		if err != nil {
			t.Fatal(err)
		}
		da, _ := a.Digest()
		db, _ := b.Digest()
		if da != db {
			t.Errorf("digests %s and %s from the same inputs", da, db)
		}
	})
	root := spec
	root.user = "0:0"
	notStatic := spec
	notStatic.binaries = map[string]string{runtime.GOARCH: filepath.Join(t.TempDir(), "script")}
	if err := os.WriteFile(notStatic.binaries[runtime.GOARCH], []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		spec    imageSpec
		w       want
		wantErr string
	}{
		{"RefusedRootUser", root, good, `config user "0:0"`},
		{"RefusedOtherVersion", spec, want{name: "writer", version: "v0.3.0", revision: "abc123", platforms: good.platforms}, `want one index named "0.3.0"`},
		{"RefusedMissingArchitecture", spec, want{name: "writer", version: "v0.2.0", revision: "abc123", platforms: []string{"amd64", "arm64"}}, "architectures"},
		{"RefusedNotAnELF", notStatic, good, "/eskv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := verifyArchive(write(t, tc.spec), tc.w)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("verify: %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestChartVersion: the chart's version, appVersion and image.tag are
// checked against a release version, set only with -set (comments and
// other lines untouched), and a version that is not semantic is refused.
func TestChartVersion(t *testing.T) {
	const chart = "apiVersion: v2\nname: eskv\nversion: 0.1.0\nappVersion: \"0.1.0\"\n"
	const values = "# c\nimage:\n  # the tag\n  registry: r\n  tag: \"0.1.0\"\n  digest: \"\"\nother:\n  tag: keep\n"
	newChart := func(t *testing.T) string {
		t.Helper()
		dir := t.TempDir()
		for name, text := range map[string]string{"Chart.yaml": chart, "values.yaml": values} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	read := func(t *testing.T, dir, name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	t.Run("OKFollows", func(t *testing.T) {
		if diffs, err := chartVersion(newChart(t), "v0.1.0", false); err != nil || len(diffs) != 0 {
			t.Fatalf("diffs %v, err %v", diffs, err)
		}
	})
	t.Run("DiffersNamesEachField", func(t *testing.T) {
		dir := newChart(t)
		diffs, err := chartVersion(dir, "v0.2.0", false)
		if err != nil || len(diffs) != 3 || read(t, dir, "Chart.yaml") != chart {
			t.Fatalf("diffs %v, err %v; the check must not write", diffs, err)
		}
	})
	t.Run("OKSetRewritesThoseLinesAlone", func(t *testing.T) {
		dir := newChart(t)
		if _, err := chartVersion(dir, "v0.2.0-rc.1", true); err != nil {
			t.Fatal(err)
		}
		if got, want := read(t, dir, "Chart.yaml"), strings.ReplaceAll(strings.Replace(chart, "version: 0.1.0", `version: "0.2.0-rc.1"`, 1), `"0.1.0"`, `"0.2.0-rc.1"`); got != want {
			t.Errorf("Chart.yaml:\n%s\nwant\n%s", got, want)
		}
		if got, want := read(t, dir, "values.yaml"), strings.Replace(values, `tag: "0.1.0"`, `tag: "0.2.0-rc.1"`, 1); got != want {
			t.Errorf("values.yaml:\n%s\nwant\n%s", got, want)
		}
		if diffs, err := chartVersion(dir, "v0.2.0-rc.1", false); err != nil || len(diffs) != 0 {
			t.Errorf("after set: diffs %v, err %v", diffs, err)
		}
	})
	for _, v := range []string{"0.2.0", "v0.2", "v0.2.0+build", "1e75d13-dirty", "v01.2.3"} {
		t.Run("RefusedNotSemantic/"+v, func(t *testing.T) {
			if _, err := chartVersion(newChart(t), v, false); err == nil {
				t.Errorf("%q accepted", v)
			}
		})
	}
}
