package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// semver is a release version: v, then a semantic version (a
// pre-release allowed: v1.2.0-rc.1), without build metadata.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// chartField is one line of the chart a release sets: a top-level key of
// Chart.yaml, or image.tag of values.yaml.
type chartField struct {
	file, name string
	line       *regexp.Regexp // matches the line; group 2 is the value
}

var chartFields = []chartField{
	{"Chart.yaml", "version", regexp.MustCompile(`(?m)^(version: *)"?([^"\n]*)"?$`)},
	{"Chart.yaml", "appVersion", regexp.MustCompile(`(?m)^(appVersion: *)"?([^"\n]*)"?$`)},
	{"values.yaml", "image.tag", regexp.MustCompile(`(?m)^(image:\n(?:(?:  .*|\s*#.*)\n)*?  tag: *)"?([^"\n]*)"?$`)},
}

// chartVersion checks that the chart in dir names version (without its
// v) as its version, appVersion and default image tag, or with set
// rewrites those lines alone. It returns the fields that differed, as
// "file field: was → want".
func chartVersion(dir, version string, set bool) ([]string, error) {
	if !semver.MatchString(version) {
		return nil, fmt.Errorf("version %q is not a release version (v1.2.3, v1.2.0-rc.1)", version)
	}
	want := tag(version)
	var diffs []string
	files := map[string]string{}
	for _, f := range chartFields {
		text, ok := files[f.file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(dir, f.file))
			if err != nil {
				return nil, err
			}
			text = string(b)
		}
		m := f.line.FindStringSubmatchIndex(text)
		if m == nil {
			return nil, fmt.Errorf("%s: no %s line", f.file, f.name)
		}
		if got := text[m[4]:m[5]]; got != want {
			diffs = append(diffs, fmt.Sprintf("%s %s: %s → %s", f.file, f.name, got, want))
			text = text[:m[0]] + text[m[2]:m[3]] + `"` + want + `"` + text[m[1]:]
		}
		files[f.file] = text
	}
	if set {
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				return nil, err
			}
		}
	}
	return diffs, nil
}

// chartCommand is release chart.
func chartCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("release chart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "deploy/helm/eskv", "the Helm chart's directory")
	version := fs.String("version", "", "the release version (v1.2.3)")
	set := fs.Bool("set", false, "set the chart's version, appVersion and image.tag instead of checking them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	diffs, err := chartVersion(*dir, *version, *set)
	if err != nil {
		return err
	}
	switch {
	case len(diffs) == 0:
		fmt.Fprintf(stdout, "%s: version, appVersion and image.tag are %s\n", *dir, tag(*version))
	case *set:
		fmt.Fprintf(stdout, "%s: set %s\n", *dir, strings.Join(diffs, "; "))
	default:
		return fmt.Errorf("%s does not follow %s: %s (scripts/release.sh set-version %s sets them)", *dir, *version, strings.Join(diffs, "; "), *version)
	}
	return nil
}
