package kvcli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
)

// A profile is a named set of kvstore settings in the profiles file, as
// an AWS profile or a nats context is: which server (one URL, or one per
// region), which token, which tenant table names are projects of, and
// the default table.
//
// The file is $KVSTORE_CONFIG, else $XDG_CONFIG_HOME/eskv/kvstore.json,
// else ~/.config/eskv/kvstore.json:
//
//	{"profiles": {"default": {"url": "http://127.0.0.1:8080", "token_file": "/path/token",
//	  "tenant": "acme", "table": "my-store", "region": "eu-central-1",
//	  "regions": {"eu-central-1": "https://eu.example", "us-east-1": "https://us.example"}}}}
//
// The profile is --profile, else KVSTORE_PROFILE, else AWS_PROFILE when
// the file has it, else "default" when the file has it, else none. A
// profile named by --profile or KVSTORE_PROFILE that the file lacks exits
// 2. The region is --region, else AWS_REGION when the profile has it,
// else the profile's region; a --region the profile has no URL for exits
// 2. What the command line gives wins over the profile (--url, --token,
// --table), and the profile wins over the environment's KVCTL_URL and
// KVCTL_TOKEN (KVSTORE_TABLE still wins over the profile's table, as the
// specification orders tables).
type profile struct {
	URL       string            `json:"url,omitempty"`
	Regions   map[string]string `json:"regions,omitempty"`
	Region    string            `json:"region,omitempty"`
	Token     string            `json:"token,omitempty"`
	TokenFile string            `json:"token_file,omitempty"`
	Tenant    string            `json:"tenant,omitempty"`
	Table     string            `json:"table,omitempty"`
	CACert    string            `json:"cacert,omitempty"` // PEM file of the CA of an https:// url (--cacert)

	name, file string // the profile's name and file, for messages
}

// profilesFile is the parsed profiles file.
type profilesFile struct {
	Profiles map[string]profile `json:"profiles"`
}

// profilesPath is where the profiles file is.
func (a *app) profilesPath() string {
	if p := a.getenv("KVSTORE_CONFIG"); p != "" {
		return p
	}
	dir := a.getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home := a.getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "eskv", "kvstore.json")
}

// addProfileFlags adds kvstore's --profile and --region.
func (a *app) addProfileFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&a.profileName, "profile", "", "profile of the profiles file (KVSTORE_PROFILE, AWS_PROFILE when the file has it, else default)")
	f.StringVar(&a.region, "region", "", "region: which of the profile's URLs (AWS_REGION when the profile has it, else the profile's region)")
}

// loadProfile finds the profile to use; nil when there is none.
func (a *app) loadProfile(cmd *cobra.Command) (*profile, error) {
	name, source := a.profileName, "--profile"
	if !cmd.Flags().Changed("profile") {
		name, source = a.getenv("KVSTORE_PROFILE"), "KVSTORE_PROFILE"
	}
	path := a.profilesPath()
	var pf profilesFile
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(b, &pf); err != nil {
			return nil, &usageError{msg: fmt.Sprintf("profiles file %s is not valid: %v", path, err), solution: `write it as {"profiles": {"NAME": {"url": ..., "tenant": ..., "table": ...}}} (see 'kvstore --help')`, cmd: a.cmdPath}
		}
	case !errors.Is(err, os.ErrNotExist) || name != "":
		if name == "" {
			return nil, &usageError{msg: fmt.Sprintf("read profiles file: %v", err), cmd: a.cmdPath}
		}
	}
	if name == "" {
		for _, n := range []string{a.getenv("AWS_PROFILE"), "default"} {
			if _, ok := pf.Profiles[n]; ok && n != "" {
				name, source = n, "the profiles file"
				break
			}
		}
	}
	if name == "" {
		return nil, a.regionWithoutProfile(cmd)
	}
	p, ok := pf.Profiles[name]
	if !ok {
		return nil, &usageError{msg: fmt.Sprintf("profile %q (from %s) is not in the profiles file %s", name, source, path),
			solution: fmt.Sprintf("add it under \"profiles\" in %s (or set KVSTORE_CONFIG to the file that has it); profiles there: %s", path, profileNames(pf)), cmd: a.cmdPath}
	}
	p.name, p.file = name, path
	return &p, a.pickRegion(cmd, &p)
}

// regionWithoutProfile refuses --region when no profile says its URL.
func (a *app) regionWithoutProfile(cmd *cobra.Command) error {
	if cmd.Flags().Changed("region") {
		return &usageError{msg: fmt.Sprintf("--region %s given, but no profile says its URL", a.region),
			solution: `add a profile with "regions": {"` + a.region + `": "URL"} to ` + a.profilesPath() + ` and name it with --profile, or give --url`, cmd: a.cmdPath}
	}
	return nil
}

// pickRegion sets p.URL to the URL of the region chosen, if any.
func (a *app) pickRegion(cmd *cobra.Command, p *profile) error {
	region := a.region
	if !cmd.Flags().Changed("region") {
		region = p.Region
		if r := a.getenv("AWS_REGION"); r != "" && p.Regions[r] != "" {
			region = r
		}
	}
	if region == "" {
		return nil
	}
	u, ok := p.Regions[region]
	if !ok {
		names := make([]string, 0, len(p.Regions))
		for r := range p.Regions {
			names = append(names, r)
		}
		sort.Strings(names)
		return &usageError{msg: fmt.Sprintf("profile %q has no URL for region %q", p.name, region),
			solution: fmt.Sprintf("give one of its regions (%s), or add %q under \"regions\" in %s", strings.Join(names, ", "), region, p.file), cmd: a.cmdPath}
	}
	p.URL = u
	return nil
}

func profileNames(pf profilesFile) string {
	if len(pf.Profiles) == 0 {
		return "none"
	}
	names := make([]string, 0, len(pf.Profiles))
	for n := range pf.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// profileToken is the profile's token (its token, else its token file's
// first line); "" when it gives none.
func (p *profile) token() (string, error) {
	if p.Token != "" || p.TokenFile == "" {
		return p.Token, nil
	}
	b, err := os.ReadFile(p.TokenFile)
	if err != nil {
		return "", &usageError{msg: fmt.Sprintf("profile %q: read token_file: %v", p.name, err), solution: "make token_file a readable file holding the token, in " + p.file}
	}
	return strings.TrimSpace(string(b)), nil
}
