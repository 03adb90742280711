package kvcli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/eskv/eskv/contract"
)

// indexesCommand reads and changes a project's declared field indexes:
// the reserved key <project>/.eskv/field-indexes (docs/api.md, "Filtered
// scans"), through the client's FieldIndexes methods.
func (a *app) indexesCommand() *cobra.Command {
	cmd := a.groupCommand(&cobra.Command{
		Use:   "indexes",
		Short: "Read and change the fields a project indexes for filtered scans",
		Long: `A project declares the top-level fields its filtered scans ('kvctl list
--where') compare; the server indexes those, and a scan of any other
field reads the values, a bounded number per page (pages may then come
short, with a cursor). The declaration is the project's reserved key
tenant/<t>/project/<p>/.eskv/field-indexes, {"fields": [...]}, at most
16 fields; changing it needs the write right on that key (a token of the
whole project has it). A new field is indexed in the background: its
scans read the values until it is ready.

'get' prints the fields, 'status' each with its index's state (ready,
or building while the keys that existed before are indexed), 'set'
declares exactly the fields given (none: nothing), 'add' and 'drop'
change the declaration without losing a concurrent change of another
declarer.`,
		Example: `  kvctl indexes get tenant/acme/project/demo
  kvctl indexes status tenant/acme/project/demo
  kvctl indexes add tenant/acme/project/demo state updated_at
  kvctl indexes drop tenant/acme/project/demo updated_at
  kvctl indexes set tenant/acme/project/demo state`,
	})
	cmd.AddCommand(a.indexesGetCommand(), a.indexesStatusCommand(), a.indexesChangeCommand("set"), a.indexesChangeCommand("add"), a.indexesChangeCommand("drop"))
	return cmd
}

func (a *app) indexesGetCommand() *cobra.Command {
	return &cobra.Command{
		Use:         "get PROJECT",
		Short:       "Print the fields a project declares",
		Long:        "Print the fields PROJECT (tenant/<t>/project/<p>) declares, one a line;\n--format json prints {\"fields\": [...], \"version\": N}.",
		Example:     `  kvctl indexes get tenant/acme/project/demo`,
		Args:        args("PROJECT"),
		Annotations: apiAnnotation,
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := a.projectScope(args[0])
			if err != nil {
				return err
			}
			a.right = "read"
			fields, version, err := a.client.FieldIndexes(cmd.Context(), scope)
			if err != nil {
				return err
			}
			return a.printIndexes(fields, version)
		},
	}
}

func (a *app) indexesStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status PROJECT",
		Short: "Print each declared field and whether its index is ready",
		Long: `Print the fields PROJECT (tenant/<t>/project/<p>) declares, one a line
with its index's state: ready (filtered scans of it read the index) or
building (the keys that existed before it was declared are being
indexed; its scans read the values meanwhile). A field declared just
before reads building. --format json prints the API's answer,
{"scope": ..., "version": N, "fields": [{"field": ..., "state": ...}]}.`,
		Example:     `  kvctl indexes status tenant/acme/project/demo`,
		Args:        args("PROJECT"),
		Annotations: apiAnnotation,
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := a.projectScope(args[0])
			if err != nil {
				return err
			}
			a.right = "read"
			st, err := a.client.FieldIndexStatus(cmd.Context(), scope)
			if err != nil {
				return err
			}
			if a.format == formatJSON {
				return a.writeJSON(st)
			}
			for _, f := range st.Fields {
				if _, err := fmt.Fprintf(a.stdout, "%s\t%s\n", f.Field, f.State); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func (a *app) indexesChangeCommand(verb string) *cobra.Command {
	short := map[string]string{
		"set":  "Declare exactly the fields given (none: nothing)",
		"add":  "Add fields to a project's declaration",
		"drop": "Remove fields from a project's declaration",
	}[verb]
	return &cobra.Command{
		Use:         verb + " PROJECT [FIELD...]",
		Short:       short,
		Long:        short + " of PROJECT (tenant/<t>/project/<p>) and print the fields\nit declares then.",
		Example:     "  kvctl indexes " + verb + " tenant/acme/project/demo state updated_at",
		Args:        cobra.MinimumNArgs(1),
		Annotations: apiAnnotation,
		RunE: func(cmd *cobra.Command, args []string) error {
			scope, err := a.projectScope(args[0])
			if err != nil {
				return err
			}
			a.right = "write"
			fields := args[1:]
			var version int64
			switch verb {
			case "set":
				version, err = a.client.SetFieldIndexes(cmd.Context(), scope, fields, nil)
			case "add":
				fields, err = a.client.AddFieldIndexes(cmd.Context(), scope, fields...)
			default:
				fields, err = a.client.DropFieldIndexes(cmd.Context(), scope, fields...)
			}
			if err != nil {
				return indexesError(err)
			}
			if verb != "set" {
				_, version, err = a.client.FieldIndexes(cmd.Context(), scope)
				if err != nil {
					return err
				}
			}
			return a.printIndexes(fields, version)
		},
	}
}

// projectScope checks PROJECT (tenant/<t>/project/<p>) and makes the
// declaration's key the subject of errors.
func (a *app) projectScope(arg string) (string, error) {
	scope := strings.TrimSuffix(arg, "/")
	k, err := contract.ParseKey(contract.FieldIndexesKey(scope))
	if err != nil || k.Scope() != scope {
		return "", &usageError{msg: fmt.Sprintf("%q is not a project", arg),
			solution: "give the project as tenant/<tenant>/project/<project>, e.g. tenant/acme/project/demo", cmd: a.cmdPath}
	}
	a.subject = contract.FieldIndexesKey(scope)
	return scope, nil
}

// indexesError explains a declaration the server (or the client, which
// checks it first) refused.
func indexesError(err error) error {
	var e *contract.Error
	if ce, ok := err.(*contract.Error); ok {
		e = ce
	}
	if e == nil || e.Code != contract.EInvalid || !strings.HasPrefix(e.Field, "value") {
		return err
	}
	return &usageError{msg: e.Message,
		solution: fmt.Sprintf("declare at most %d distinct fields, each a top-level field name of 1 to %d bytes", contract.MaxFieldIndexes, contract.MaxFieldNameBytes)}
}

// printIndexes prints the declared fields in a.format.
func (a *app) printIndexes(fields []string, version int64) error {
	if a.format == formatJSON {
		return a.writeJSON(map[string]any{"fields": fields, "version": version})
	}
	for _, f := range fields {
		if _, err := fmt.Fprintln(a.stdout, f); err != nil {
			return err
		}
	}
	return nil
}
