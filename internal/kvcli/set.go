package kvcli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
	"github.com/eskv/eskv/contract"
)

func (a *app) setCommand() *cobra.Command {
	var o setOptions
	cmd := &cobra.Command{
		Use:   "set KEY [VALUE | -]",
		Short: "Write a key's value (optionally compare-and-swap)",
		Long: `Write a new version of a key. The value is given as an argument, read
from stdin with -, or from a file with --file. ` + valueRuleHelp + `
Stdin and --file hold JSON, unless --string stores their text.

--expected-version makes the write conditional: 0 means the key must not
exist, N means it must be at version N. A mismatch exits 1 and says the
current version. --if-not-exists is the seed's spelling of
--expected-version 0: a key that exists exits 1 ("Key ... already
exists") and is left as it is.

Without --ttl, KVSTORE_DEFAULT_TTL (a duration or seconds) is the entry's
expiry when set; otherwise it does not expire.

--format text prints "KEY version N", json the entry as the API answers
it, value the stored value.`,
		Example: `  kvctl set tenant/acme/project/demo/greeting '{"hello":"world"}'
  kvctl set tenant/acme/project/demo/greeting '"text values are quoted"'
  kvctl set tenant/acme/project/demo/flag true --expected-version 0 --purpose feature_flag
  kvctl set tenant/acme/project/demo/checkpoint '{"cursor":43}' --expected-version 7 --request-id sync-43
  kvctl set tenant/acme/project/demo/session '"worker-1"' --ttl 30s
  kvctl set tenant/acme/project/demo/services/web/1 '{"addr":"10.0.0.1:80"}' --session tenant/acme/project/demo/sessions/web-1
  kvctl set agent/status '"active"' --if-not-exists --table tenant/acme/project/demo
  echo '{"cursor":42}' | kvctl set tenant/acme/project/demo/checkpoint -
  kvctl set tenant/acme/project/demo/config --file config.json --purpose config --producer deploy --hint web`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) == 1 || len(got) == 2 {
				return nil
			}
			return &usageError{msg: fmt.Sprintf("kvctl set takes KEY and VALUE (or - for stdin, or --file); got %d arguments", len(got)), cmd: cmd.CommandPath()}
		},
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeKey,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.set(cmd, args, &o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "read the value from this file")
	o.value.add(cmd)
	f.BoolVar(&o.ifNotExists, "if-not-exists", false, "write only if the key does not exist (exit 1 if it does): --expected-version 0")
	o.w.add(cmd, writeUsage{
		expected:  "write only if the key is at this version (0: only if it does not exist)",
		ttl:       "expire the entry after this long: a duration (30s, 15m, 24h) or seconds",
		requestID: "idempotency id: repeating the same write with it is answered as a replay, and kvctl may retry it",
		specRef:   "reference to the spec or decision record the write follows",
	})
	f.StringVar(&o.sem.Purpose, "purpose", "", "what the entry is for: "+strings.Join(contract.Purposes, ", ")+" (server default: other)")
	f.StringVar(&o.sem.Producer, "producer", "", "the producing service or agent")
	f.StringVar(&o.session, "session", "", "attach the key to this session (kvctl session): no TTL of its own, deleted when the session ends")
	f.StringArrayVar(&o.sem.ConsumerHints, "hint", nil, "a hint for consumers (repeatable)")
	_ = cmd.RegisterFlagCompletionFunc("purpose", cobra.FixedCompletions(contract.Purposes, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// setOptions are set's flags.
type setOptions struct {
	file        string
	w           writeFlags
	sem         contract.Semantics
	ifNotExists bool
	value       valueRule
	session     string
}

// set writes KEY's value (args: KEY and VALUE or -) as o says.
func (a *app) set(cmd *cobra.Command, args []string, o *setOptions) error {
	key, err := a.key(args[0])
	if err != nil {
		return err
	}
	a.right = "write"
	value, err := a.readValue(args[1:], o.file, o.value)
	if err != nil {
		return err
	}
	r := client.PutRequest{Key: key, Value: value, Semantics: o.sem, RequestID: o.w.requestID, SpecRef: o.w.specRef,
		ExpectedVersion: o.w.expectedVersion(cmd), Session: o.session}
	if o.session != "" {
		if r.Session, err = a.key(o.session); err != nil {
			return err
		}
	}
	if o.ifNotExists {
		if r.ExpectedVersion != nil {
			return &usageError{msg: "--if-not-exists and --expected-version both given", solution: "give one: --if-not-exists is --expected-version 0", cmd: a.cmdPath}
		}
		r.ExpectedVersion = new(int64)
	}
	a.createOnly = r.ExpectedVersion != nil && *r.ExpectedVersion == 0
	if r.TTL, err = o.w.lease(); err != nil {
		return err
	}
	if !cmd.Flags().Changed("ttl") && o.session == "" {
		if r.TTL, err = a.envTTL("KVSTORE_DEFAULT_TTL"); err != nil {
			return err
		}
	}
	res, err := a.client.Put(cmd.Context(), r)
	if o.ifNotExists && contract.ErrorCode(err) == contract.EConflict && r.RequestID == "" {
		return &failure{code: exitFailed, msg: fmt.Sprintf("Key %q already exists", key),
			solution: fmt.Sprintf("keep it, or overwrite it without --if-not-exists: 'kvctl set %s VALUE'", key)}
	}
	if err != nil {
		return err
	}
	a.noteReplayed(res.Replayed, o.w.requestID, "written")
	line := fmt.Sprintf("%s version %d", res.Entry.Key, res.Entry.Version)
	if res.Entry.ExpiresAt != nil {
		line += ", expires " + timeText(*res.Entry.ExpiresAt)
	}
	return a.writeEntry(res.Entry, line)
}

// readValue returns the JSON value from the VALUE argument, stdin (-) or
// --file; exactly one of them. The argument follows valueRule; stdin and
// --file hold JSON (a file that is not JSON is more likely broken than
// text), unless --string stores their text (less one final newline).
func (a *app) readValue(rest []string, file string, rule valueRule) (json.RawMessage, error) {
	var (
		b      []byte
		err    error
		source string
	)
	switch {
	case len(rest) == 1 && file != "":
		return nil, &usageError{msg: "both VALUE and --file given", solution: "give the value once: as an argument, - for stdin, or --file PATH", cmd: a.cmdPath}
	case file != "":
		source = "--file " + file
		if b, err = os.ReadFile(file); err != nil {
			return nil, &usageError{msg: fmt.Sprintf("read --file: %v", err), solution: "give a readable file, or the value as an argument", cmd: a.cmdPath}
		}
	case len(rest) == 0:
		return nil, &usageError{msg: "no value given", solution: "give the value as an argument, - for stdin, or --file PATH, e.g. kvctl set KEY '{\"n\":1}'", cmd: a.cmdPath}
	case rest[0] == "-":
		source = "stdin"
		if b, err = io.ReadAll(a.stdin); err != nil {
			return nil, &usageError{msg: fmt.Sprintf("read stdin: %v", err), cmd: a.cmdPath}
		}
	default:
		return rule.parse(rest[0], "VALUE", a.cmdPath)
	}
	if err := rule.check(a.cmdPath); err != nil {
		return nil, err
	}
	if rule.asString {
		return jsonString(strings.TrimSuffix(string(b), "\n")), nil
	}
	if !json.Valid(b) {
		return nil, &usageError{msg: fmt.Sprintf("the value from %s is not JSON: %s", source, shorten(strings.TrimSpace(string(b)))),
			solution: `stdin and --file hold JSON: quote text as a JSON string, or store the text with --string`, cmd: a.cmdPath}
	}
	return b, nil
}

// parseTTL reads a duration (30s, 1h30m) or whole seconds (3600).
func parseTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if n, nerr := strconv.ParseInt(s, 10, 64); nerr == nil {
		d, err = time.Duration(n)*time.Second, nil
	}
	if err != nil || d < time.Second || d%time.Second != 0 {
		return 0, &usageError{msg: fmt.Sprintf("--ttl %q is not a whole number of seconds of at least 1s", s),
			solution: "give a duration such as --ttl 30s, --ttl 24h, or seconds such as --ttl 3600"}
	}
	return d, nil
}

// envTTL reads a default TTL from the environment variable name (a
// duration or seconds, as --ttl); 0 when it is unset. A bad value is a
// usage error naming the variable, never a silent fallback.
func (a *app) envTTL(name string) (time.Duration, error) {
	v := a.getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := parseTTL(v)
	if err != nil {
		return 0, &usageError{msg: fmt.Sprintf("%s=%q is not a whole number of seconds of at least 1s", name, v),
			solution: fmt.Sprintf("set %s to a duration such as 1h or seconds such as 3600, or unset it", name), cmd: a.cmdPath}
	}
	return d, nil
}
