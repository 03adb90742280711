package kvcli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eskv/eskv/codec"
	"github.com/eskv/eskv/contract"
)

// valueRule is how kvctl reads every VALUE argument (set's VALUE, lpush
// and rpush's VALUE, queue push's DATA, field set and cas's values,
// delete --if-value, get --default): one rule, so a script never has to
// remember which command quotes text.
//
//   - by default, an argument that is valid JSON is that JSON (compacted)
//     and anything else is the text as a JSON string: config/api-key
//     sk-abc123 stores "sk-abc123", 42 stores the number 42;
//   - --json requires JSON: text that is not JSON is a usage error (exit
//     2) instead of a string, for scripts that must never store a typo;
//   - --string forces a JSON string: 42 stores "42".
//
// The two flags exclude each other.
type valueRule struct {
	asJSON, asString bool
}

// valueRuleHelp is the rule in one sentence, for commands' long help.
const valueRuleHelp = `VALUE is JSON when it is valid JSON and text (stored as a JSON string)
otherwise; --json requires JSON (text exits 2), --string stores it as a
JSON string even when it reads as JSON (--string 42 stores "42").`

// add registers --json and --string on cmd.
func (v *valueRule) add(cmd *cobra.Command) {
	addValueRuleFlags(cmd.Flags(), v)
}

func addValueRuleFlags(f *pflag.FlagSet, v *valueRule) {
	f.BoolVar(&v.asJSON, "json", false, "the value must be JSON (text that is not JSON exits 2)")
	f.BoolVar(&v.asString, "string", false, "store the value as a JSON string even when it reads as JSON")
}

// check refuses --json and --string together.
func (v valueRule) check(cmdPath string) error {
	if v.asJSON && v.asString {
		return &usageError{msg: "--json and --string both given", solution: "give one: --json requires JSON, --string stores text", cmd: cmdPath}
	}
	return nil
}

// parse reads s (from source, such as VALUE or --if-value) by the rule,
// as the JSON to send.
func (v valueRule) parse(s, source, cmdPath string) (json.RawMessage, error) {
	if err := v.check(cmdPath); err != nil {
		return nil, err
	}
	if v.asString {
		return jsonString(s), nil
	}
	if json.Valid([]byte(s)) {
		b, err := codec.CompactValue(json.RawMessage(s), contract.DefaultMaxValueBytes)
		if err != nil {
			return nil, &usageError{msg: fmt.Sprintf("the value from %s: %v", source, err), cmd: cmdPath}
		}
		return b, nil
	}
	if v.asJSON {
		return nil, &usageError{msg: fmt.Sprintf("the value from %s is not JSON: %s", source, shorten(strings.TrimSpace(s))),
			solution: "give valid JSON (quote text as a JSON string, e.g. '\"hello\"'), or leave out --json to store text as a string", cmd: cmdPath}
	}
	return jsonString(s), nil
}

// jsonString is s as a JSON string, without HTML escaping.
func jsonString(s string) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return bytes.TrimRight(buf.Bytes(), "\n")
}
