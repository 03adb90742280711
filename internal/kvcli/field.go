package kvcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/client"
)

func (a *app) fieldCommand() *cobra.Command {
	cmd := a.groupCommand(&cobra.Command{
		Use:   "field",
		Short: "Read and change top-level fields of an object value",
		Long: `Read one top-level field of a key whose value is a JSON object, or change
fields without reading the whole value first: the server applies the
change to the entry as it is, so concurrent writers of different fields
never overwrite each other.

Values given on the command line are JSON when they parse as JSON (42,
true, null, {"a":1}, "quoted"), otherwise text: state=claimed stores the
string "claimed", n=5 the number 5, and n='"5"' the string "5".`,
		Example: `  kvctl field get tenant/acme/project/demo/jobs/7 state
  kvctl field set tenant/acme/project/demo/jobs/7 state=done attempts=2
  kvctl field cas tenant/acme/project/demo/jobs/7 state pending claimed owner=worker-1`,
	})
	cmd.AddCommand(a.fieldGetCommand(), a.fieldSetCommand(), a.fieldCASCommand())
	return cmd
}

func (a *app) fieldGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "get KEY FIELD",
		Short: "Print one field of an object value",
		Long: `Print the top-level FIELD of the object stored at KEY.

A missing key or field exits 1; a value that is not an object exits 1.

--format text prints key, field, value and version on lines, json
{"key","version","field","value"}, value only the field's JSON value.`,
		Example: `  kvctl field get tenant/acme/project/demo/jobs/7 state
  kvctl field get tenant/acme/project/demo/jobs/7 state --format value
  kvctl field get tenant/acme/project/demo/config limits --format json | jq .value.rps`,
		Args:              args("KEY", "FIELD"),
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeField(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.key(args[0])
			if err != nil {
				return err
			}
			a.right, a.field = "read", args[1]
			f, err := a.client.GetField(cmd.Context(), k, args[1])
			if err != nil {
				return err
			}
			switch a.format {
			case formatJSON:
				return a.writeJSON(f)
			case formatValue:
				return writeValue(a.stdout, f.Value)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "key\t%s\nfield\t%s\nvalue\t%s\nversion\t%d\n", printable(f.Key), printable(f.Field), printable(string(f.Value)), f.Version)
			return tw.Flush()
		},
	}
}

// patchFlags are the options field set and field cas share.
type patchFlags struct {
	writeFlags
	create bool
	rule   valueRule // how each VALUE, EXPECTED and NEW reads
}

func (p *patchFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&p.create, "create", false, "start a missing key from {}")
	p.rule.add(cmd)
	p.writeFlags.add(cmd, writeUsage{
		expected:  "change it only if the key is at this version",
		ttl:       "expire the entry this long after the change: a duration (30s, 24h) or seconds (default: keep its expiry)",
		requestID: "idempotency id: repeating the change with it is answered as a replay, and kvctl may retry it",
		specRef:   "reference to the spec or decision record the change follows",
	})
}

// request starts the patch of key from the flags.
func (p *patchFlags) request(cmd *cobra.Command, key string) (client.PatchRequest, error) {
	r := client.PatchRequest{Key: key, Create: p.create, ExpectedVersion: p.expectedVersion(cmd), RequestID: p.requestID, SpecRef: p.specRef}
	var err error
	r.TTL, err = p.lease()
	return r, err
}

func (a *app) fieldSetCommand() *cobra.Command {
	var (
		p     patchFlags
		unset []string
	)
	cmd := &cobra.Command{
		Use:   "set KEY FIELD=VALUE...",
		Short: "Set (or unset) fields of an object value",
		Long: `Set top-level fields of the object stored at KEY, and remove those named
by --unset, in one write; the other fields stay as they are.

VALUE is JSON when it parses as JSON, otherwise text (state=done stores
"done"); --json requires JSON, --string stores text. A missing key exits 1 unless --create starts it from {}; a value
that is not an object exits 1.

--format text prints "KEY version N", json the entry after the change,
value the stored object.`,
		Example: `  kvctl field set tenant/acme/project/demo/jobs/7 state=done attempts=2
  kvctl field set tenant/acme/project/demo/jobs/7 'result={"rows":120}' --unset error
  kvctl field set tenant/acme/project/demo/profile name='"007"' --create   # the string "007"
  kvctl field set tenant/acme/project/demo/jobs/7 --unset owner --expected-version 4`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) == 0 {
				return &usageError{msg: "kvctl field set takes KEY and FIELD=VALUE pairs; got no arguments", cmd: cmd.CommandPath()}
			}
			return nil
		},
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeField("="),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.key(args[0])
			if err != nil {
				return err
			}
			a.right = "write"
			r, err := p.request(cmd, k)
			if err != nil {
				return err
			}
			if r.Set, err = a.assignments(args[1:], p.rule); err != nil {
				return err
			}
			r.Unset = unset
			if len(r.Set) == 0 && len(r.Unset) == 0 {
				return &usageError{msg: "no fields to set or unset", solution: "give FIELD=VALUE pairs or --unset FIELD, e.g. kvctl field set KEY state=done", cmd: a.cmdPath}
			}
			return a.patch(cmd.Context(), r)
		},
	}
	p.add(cmd)
	cmd.Flags().StringArrayVar(&unset, "unset", nil, "remove this field (repeatable)")
	return cmd
}

func (a *app) fieldCASCommand() *cobra.Command {
	var p patchFlags
	cmd := &cobra.Command{
		Use:   "cas KEY FIELD EXPECTED NEW [FIELD=VALUE...]",
		Short: "Compare-and-swap one field of an object value",
		Long: `Set FIELD to NEW only while it equals EXPECTED (compared as JSON: key
order and number spelling do not matter; null matches a missing field).
FIELD=VALUE pairs after NEW are set in the same write. Of several
clients swapping the same field from the same value, exactly one wins.

EXPECTED, NEW and VALUE are JSON when they parse as JSON, otherwise text;
--json requires JSON, --string stores text.
A mismatch exits 1 and its Solution says the field's current value; a
missing key exits 1 unless --create starts it from {}.

--format text prints "KEY version N", json the entry after the change,
value the stored object.`,
		Example: `  kvctl field cas tenant/acme/project/demo/jobs/7 state pending claimed owner=worker-1
  kvctl field cas tenant/acme/project/demo/jobs/7 owner null worker-1 --create   # claim if unowned
  kvctl field cas tenant/acme/project/demo/config limits '{"rps":10}' '{"rps":20}'`,
		Args: func(cmd *cobra.Command, got []string) error {
			if len(got) >= 4 {
				return nil
			}
			return &usageError{msg: fmt.Sprintf("kvctl field cas takes KEY FIELD EXPECTED NEW [FIELD=VALUE...]; got %d argument(s)", len(got)), cmd: cmd.CommandPath()}
		},
		Annotations:       apiAnnotation,
		ValidArgsFunction: a.completeField(""),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, err := a.key(args[0])
			if err != nil {
				return err
			}
			a.right, a.field = "write", args[1]
			r, err := p.request(cmd, k)
			if err != nil {
				return err
			}
			if err := checkFieldName(args[1]); err != nil {
				return err
			}
			if r.Set, err = a.assignments(args[4:], p.rule); err != nil {
				return err
			}
			if _, dup := r.Set[args[1]]; dup {
				return &usageError{msg: fmt.Sprintf("field %s is both swapped and set", args[1]), solution: "give its new value once, as NEW", cmd: a.cmdPath}
			}
			if r.Set == nil {
				r.Set = map[string]json.RawMessage{}
			}
			expected, err := p.rule.parse(args[2], "EXPECTED", a.cmdPath)
			if err != nil {
				return err
			}
			a.expected = string(expected)
			r.If = &client.FieldCondition{Field: args[1], Equals: expected}
			if r.Set[args[1]], err = p.rule.parse(args[3], "NEW", a.cmdPath); err != nil {
				return err
			}
			return a.patch(cmd.Context(), r)
		},
	}
	p.add(cmd)
	return cmd
}

// patch sends r and prints the entry after it like set does.
func (a *app) patch(ctx context.Context, r client.PatchRequest) error {
	res, err := a.client.Patch(ctx, r)
	if err != nil {
		return err
	}
	a.noteReplayed(res.Replayed, r.RequestID, "written")
	return a.writeEntry(res.Entry, fmt.Sprintf("%s version %d", res.Entry.Key, res.Entry.Version))
}

// assignments parses FIELD=VALUE arguments.
func (a *app) assignments(args []string, rule valueRule) (map[string]json.RawMessage, error) {
	if len(args) == 0 {
		return nil, nil
	}
	set := make(map[string]json.RawMessage, len(args))
	for _, arg := range args {
		name, v, ok := strings.Cut(arg, "=")
		if !ok {
			return nil, &usageError{msg: fmt.Sprintf("%q is not FIELD=VALUE", arg), solution: "give fields as FIELD=VALUE, e.g. state=done or 'limits={\"rps\":10}'", cmd: a.cmdPath}
		}
		if err := checkFieldName(name); err != nil {
			return nil, err
		}
		if _, dup := set[name]; dup {
			return nil, &usageError{msg: fmt.Sprintf("field %s is given twice", name), solution: "give each field once", cmd: a.cmdPath}
		}
		value, err := rule.parse(v, "FIELD="+name, a.cmdPath)
		if err != nil {
			return nil, err
		}
		set[name] = value
	}
	return set, nil
}

func checkFieldName(name string) error {
	if name == "" {
		return &usageError{msg: "a field name is empty", solution: "name the field, e.g. state=done"}
	}
	return nil
}

// fieldValue reads a command-line value: JSON when it is valid JSON,
// otherwise the text as a JSON string.
func fieldValue(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		var buf bytes.Buffer
		if json.Compact(&buf, []byte(s)) == nil {
			return buf.Bytes()
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// completeField completes KEY, then the names of its value's fields
// (followed by suffix, "=" for field set).
func (a *app) completeField(suffix string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return a.completeKey(cmd, args, toComplete)
		}
		none := cobra.ShellCompDirectiveNoFileComp
		if (suffix == "" && len(args) > 1) || strings.Contains(toComplete, "=") {
			return nil, none
		}
		if err := a.resolve(cmd); err != nil {
			return nil, none
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 2*time.Second)
		defer cancel()
		k, err := resolveKey(args[0], a.ns)
		if err != nil {
			return nil, none
		}
		e, err := a.client.Get(ctx, k)
		if err != nil {
			return nil, none
		}
		var fields map[string]json.RawMessage
		if json.Unmarshal(e.Value, &fields) != nil {
			return nil, none
		}
		var names []cobra.Completion
		for name := range fields {
			if strings.HasPrefix(name, toComplete) {
				names = append(names, name+suffix)
			}
		}
		slices.Sort(names)
		if suffix != "" {
			none |= cobra.ShellCompDirectiveNoSpace
		}
		return names, none
	}
}
