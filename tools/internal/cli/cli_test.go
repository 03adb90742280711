package cli

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func flags() (*flag.FlagSet, *int, *string) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs, fs.Int("partitions", 12, ""), fs.String("log-level", "warn", "")
}

func TestParse(t *testing.T) {
	aliases := map[string]string{"partitions": "ESKV_PARTITIONS"}
	for _, tc := range []struct {
		name       string
		args       []string
		env        map[string]string
		partitions int
		level      string
		err        string
	}{
		{"OKDefaults", nil, nil, 12, "warn", ""},
		{"OKPrefixed", nil, map[string]string{"ESKV_T_LOG_LEVEL": "info", "ESKV_T_PARTITIONS": "3"}, 3, "info", ""},
		{"OKAlias", nil, map[string]string{"ESKV_PARTITIONS": "4"}, 4, "warn", ""},
		{"OKPrefixedBeforeAlias", nil, map[string]string{"ESKV_PARTITIONS": "4", "ESKV_T_PARTITIONS": "5"}, 5, "warn", ""},
		{"OKCommandLineFirst", []string{"-partitions", "6"}, map[string]string{"ESKV_PARTITIONS": "4", "ESKV_T_PARTITIONS": "5"}, 6, "warn", ""},
		{"ErrBadAliasValue", nil, map[string]string{"ESKV_PARTITIONS": "twelve"}, 0, "", "ESKV_PARTITIONS"},
		{"ErrBadPrefixedValue", nil, map[string]string{"ESKV_T_PARTITIONS": "twelve"}, 0, "", "ESKV_T_PARTITIONS"},
		{"ErrArguments", []string{"extra"}, nil, 0, "", "unexpected arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"ESKV_PARTITIONS", "ESKV_T_PARTITIONS", "ESKV_T_LOG_LEVEL"} {
				t.Setenv(k, tc.env[k])
			}
			fs, partitions, level := flags()
			err := Parse(fs, tc.args, "ESKV_T", aliases)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want it to name %s", err, tc.err)
				}
				return
			}
			if err != nil || *partitions != tc.partitions || *level != tc.level {
				t.Fatalf("got %d %q %v, want %d %q", *partitions, *level, err, tc.partitions, tc.level)
			}
		})
	}
}
